"""A Hugging Face ``save_to_disk`` folder written back as one: the kept rows of every split, the
replaced captions in place, every other column and the features as they were (a ``Dataset`` in,
a ``Dataset`` out; a ``DatasetDict`` in, a ``DatasetDict`` out), read back with
``datasets.load_from_disk``.

Nothing is decoded: the rows are chosen with ``Dataset.select`` and the caption column replaced
as one Arrow array, so the pictures' bytes are copied as they are, never re-encoded. A row of
one caption is kept when its pair is; a row with a list of captions keeps the captions whose
pairs are kept (in their order, replaced ones replaced) and is dropped when none is (its other
columns, a parallel list such as Flickr30k's ``sentids`` included, stay as they were).

``save_to_disk`` writes into a fresh folder inside the output, whose files are then moved into
place (a link planted in the output is replaced, never followed); a split's name is a folder's,
checked to be a plain name before anything is saved (a split ``../../x`` would be written outside
the output). Pair ids are the reader's (:mod:`mispair.data.readers.hf_dataset`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mispair.audit.writers.base import Decided, WriteRequest, Written
from mispair.data.readers.hf_dataset import (
    BATCH_ROWS,
    DatasetColumns,
    check_split_names,
    dataset_columns,
    dataset_parts,
    load_saved,
    no_progress_bars,
    row_pair_ids,
)
from mispair.errors import DataError
from mispair.safe_io import made_parents


def write_dataset(request: WriteRequest, folder: Path) -> Written:
    """The ``save_to_disk`` folder ``request.collection`` with the decisions applied, saved into
    ``folder``."""
    where = str(request.collection)
    loaded = load_saved(request.collection)
    written = Written()
    parts = {}
    for split, part in dataset_parts(loaded, where):
        names = dataset_columns(part, request.columns, f"{where}/{split}" if split else where)
        parts[split] = _cleaned(split, part, names, request.decided, written)
    cleaned = parts[""] if "" in parts else type(loaded)(parts)
    check_split_names([split for split in parts if split], where)
    written.files = _saved(cleaned, folder)
    return written


def _cleaned(split: str, part: Any, names: DatasetColumns, decided: Decided, written: Written) -> Any:
    """``part``'s kept rows, its caption column as decided."""
    keep, values, changed = [], [], False
    captions = _captions(part, names.caption)
    for row, ((_, ids), caption) in enumerate(zip(row_pair_ids(split, part, names), captions)):
        texts = list(caption or []) if names.listed else [caption]
        kept = [(t, decided.caption(i)) for i, t in zip(ids, texts) if decided.keeps(i)]
        written.read += 1
        written.replaced += sum(new is not None for _, new in kept)
        new_texts = [t if new is None else new for t, new in kept]
        changed = changed or new_texts != texts
        values.append(new_texts if names.listed else (new_texts or [caption])[0])
        if kept:
            keep.append(row)
    written.kept += len(keep)
    if changed:
        part = _with_column(part, names.caption, values)
    return part.select(keep)


def _captions(part: Any, column: str) -> Any:
    for batch in part.select_columns([column]).with_format("arrow").iter(BATCH_ROWS):
        yield from batch.column(column).to_pylist()


def _with_column(part: Any, name: str, values: list) -> Any:
    """``part`` with the column ``name`` replaced by ``values`` (its Arrow type and place kept)."""
    import pyarrow as pa

    with no_progress_bars() as datasets:
        table = part.data
        index = table.column_names.index(name)
        field = table.schema.field(index)
        column = pa.array(values, type=field.type)
        return datasets.Dataset(
            table.set_column(index, field, column), info=part.info.copy(), split=part.split
        )


def _saved(cleaned: Any, folder: Path) -> list[str]:
    """``cleaned`` saved into ``folder`` (through a fresh folder beside its files); the files
    written, relative to ``folder``."""
    staging = Path(tempfile.mkdtemp(prefix=".mispair-dataset-", dir=folder))
    try:
        with no_progress_bars():
            cleaned.save_to_disk(str(staging / "saved"))
        files = sorted(
            p.relative_to(staging / "saved") for p in (staging / "saved").rglob("*") if p.is_file()
        )
        for name in files:
            _move(staging / "saved" / name, folder, name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [name.as_posix() for name in files]


def _move(source: Path, folder: Path, name: Path) -> None:
    """``source`` moved to ``folder/name``, its folders made (a link among them, a part that is
    not a plain name, refused: :func:`~mispair.safe_io.made_parents`)."""
    target = made_parents(folder, name.as_posix())
    if target.is_dir() and not target.is_symlink():
        raise DataError(f"{target}: a folder in the output where a file of the dataset goes; remove it")
    os.replace(source, target)

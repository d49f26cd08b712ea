"""What the reader, the writer and ``AuditResult.to_dataset`` share about a Hugging Face
``datasets`` collection: the library (imported only here, when used), a ``save_to_disk`` folder
recognised and loaded, its columns found, and every row's pair ids.

A ``Dataset``'s folder holds ``state.json`` and ``dataset_info.json`` beside its Arrow files; a
``DatasetDict``'s holds ``dataset_dict.json`` and one such folder per split. The image column is
the one whose feature is ``Image`` (or the column named: ``--image-column``), the caption column
is found as a table's is (:mod:`mispair.data.readers.columns`). A caption column of strings gives
one pair per row; a column of lists of strings (Flickr30k on the Hub: five captions per picture)
one pair per caption.

Pair ids: the id column's value, else the row number from 0, prefixed by the split for a
``DatasetDict`` (``train/17``); a caption of a list gets its place in the list (``17/0`` ..
``17/4``). Nothing is a content hash: an id names its row.

A ``DatasetDict``'s split names become folder names (``save_to_disk`` writes ``folder/<split>``,
``load_from_disk`` reads it): each must be a plain name (:func:`mispair.safe_io.plain_part`), or a
split named ``../../x`` would be written, or read, outside its folder. They are checked before a
dataset is saved (:func:`save_input`, the writer) and in ``dataset_dict.json`` before one is
loaded (:func:`load_saved`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mispair.data.readers.columns import Columns
from mispair.errors import DataError
from mispair.limits import limit, raise_hint
from mispair.safe_io import plain_part, read_input

EXTRA = "pip install 'mispair[hf]'"
DATASET_FILES = ("state.json", "dataset_info.json")
DICT_FILE = "dataset_dict.json"
INPUT_DATASET = "input_dataset"
"""The folder of the output a Dataset given to ``mispair.audit`` / ``mispair.train`` is saved to."""
BATCH_ROWS = 256
"""Rows read at a time: image bytes in memory stay bounded by a batch."""


def hf_datasets() -> Any:
    """The ``datasets`` module, or a one-line error naming the extra that installs it."""
    try:
        import datasets
    except ImportError:
        raise DataError(f"a Hugging Face dataset needs the datasets library ({EXTRA})") from None
    return datasets


def is_dataset_object(value: object) -> bool:
    """``value`` is an object of the ``datasets`` library (checked without importing it)."""
    return type(value).__module__.split(".")[0] == "datasets"


def is_saved_dataset(path: Path) -> bool:
    """``path`` is a folder ``save_to_disk`` wrote (a ``Dataset``'s or a ``DatasetDict``'s)."""
    if not path.is_dir():
        return False
    return (path / DICT_FILE).is_file() or all((path / name).is_file() for name in DATASET_FILES)


@contextlib.contextmanager
def no_progress_bars() -> Iterator[Any]:
    """The ``datasets`` module with its progress bars off for the block (as they were after)."""
    datasets = hf_datasets()
    was_off = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        yield datasets
    finally:
        if not was_off:
            datasets.enable_progress_bars()


def save_input(source: Any, out: Path) -> Path:
    """A ``Dataset`` or ``DatasetDict`` given to ``mispair.audit`` / ``mispair.train`` saved as
    ``out/input_dataset`` (``save_to_disk``: its Arrow data as it is, pictures known by path
    embedded), replacing an earlier one only once the new one is whole; a streaming
    ``IterableDataset`` is refused, saying how to materialise it."""
    import shutil

    datasets = hf_datasets()
    if isinstance(source, (datasets.IterableDataset, datasets.IterableDatasetDict)):
        raise DataError(
            f"a streaming {type(source).__name__} is not read: materialise it first, e.g. "
            "load_dataset(..., streaming=False), or Dataset.from_generator(lambda: (yield from "
            "ids), features=ids.features) for the rows you want"
        )
    if not isinstance(source, (datasets.Dataset, datasets.DatasetDict)):
        raise DataError(f"source: a Dataset or a DatasetDict, got {type(source).__name__}")
    if isinstance(source, datasets.DatasetDict):
        check_split_names(source.keys(), "the DatasetDict")
    target, fresh = out / INPUT_DATASET, out / f".{INPUT_DATASET}.new"
    shutil.rmtree(fresh, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    with no_progress_bars():
        try:
            source.save_to_disk(str(fresh))
        except (OSError, ValueError, TypeError) as exc:
            shutil.rmtree(fresh, ignore_errors=True)
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise DataError(f"the {type(source).__name__}: cannot be saved to read it ({first})") from None
    shutil.rmtree(target, ignore_errors=True)
    fresh.rename(target)
    return target


def check_split_names(names: Any, where: str) -> None:
    """Refuse a split name that is not a plain folder name (:func:`~mispair.safe_io.plain_part`)."""
    for name in names:
        plain_part(name, f"{where}: the split")


def load_saved(path: Path) -> Any:
    """The ``Dataset`` or ``DatasetDict`` saved in ``path`` (memory-mapped, nothing decoded), its
    ``dataset_dict.json`` checked first: a bounded JSON file whose splits are plain names."""
    if (path / DICT_FILE).exists():
        _check_dict_file(path / DICT_FILE)
    with no_progress_bars() as datasets:
        try:
            return datasets.load_from_disk(str(path))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise DataError(f"{path}: not a readable save_to_disk folder ({first})") from None


def _check_dict_file(file: Path) -> None:
    from mispair.safe_parse import load_json

    data = read_input(file, limit("MAX_CONFIG_BYTES"), DICT_FILE, hint=raise_hint("MAX_CONFIG_BYTES"))
    value = load_json(data, file)
    splits = value.get("splits") if isinstance(value, dict) else None
    if not isinstance(splits, list):
        raise DataError(f"{file}: not a save_to_disk {DICT_FILE} (no list of splits)")
    check_split_names(splits, str(file))


def dataset_parts(loaded: Any, where: str) -> list[tuple[str, Any]]:
    """``(split, Dataset)`` of a ``Dataset`` (split "") or of each split of a ``DatasetDict``
    (each split's name a plain name)."""
    datasets = hf_datasets()
    if isinstance(loaded, datasets.DatasetDict):
        check_split_names(loaded.keys(), where)
        return [(str(name), part) for name, part in loaded.items()]
    if isinstance(loaded, datasets.Dataset):
        return [("", loaded)]
    raise DataError(f"{where}: a Dataset or a DatasetDict is needed, got {type(loaded).__name__}")


@dataclass(frozen=True)
class DatasetColumns:
    """The columns of a dataset's roles (``image``, ``caption``, ``id``, ``split``; the last
    two None when absent), and whether a caption cell is a list of captions (``listed``)."""

    image: str
    caption: str
    id: str | None
    split: str | None
    listed: bool


def dataset_columns(part: Any, columns: Columns, where: str) -> DatasetColumns:
    """The columns of ``part`` (a ``Dataset``) for each role: those ``columns`` names, the image
    by its ``Image`` feature, the others by their usual names."""
    datasets = hf_datasets()
    features = part.features
    names = list(features)
    image = columns.image or _image_column(features, datasets.Image, where)
    resolved = Columns(image=image, caption=columns.caption, id=columns.id, split=columns.split)
    found = resolved.resolve(names, where)
    if not _holds_pictures(part.data.schema.field(image).type):
        raise DataError(
            f"{where}: the image column {image!r} holds {features[image]}, not images, image bytes "
            "or paths; name another with --image-column"
        )
    kind = _text_kind(part.data.schema.field(found.caption).type)
    if kind is None:
        raise DataError(
            f"{where}: the caption column {found.caption!r} holds {features[found.caption]}, not text or a "
            "list of texts; name another with --caption-column"
        )
    return DatasetColumns(image, str(found.caption), found.id, found.split, kind == "list")


def _image_column(features: Any, image_type: type, where: str) -> str:
    pictures = [name for name, feature in features.items() if isinstance(feature, image_type)]
    if len(pictures) == 1:
        return pictures[0]
    listed = ", ".join(features) or "none"
    if not pictures:
        raise DataError(
            f"{where}: no column with an Image feature; name the image column with --image-column "
            f"(columns found: {listed})"
        )
    raise DataError(f"{where}: columns {', '.join(pictures)} each hold images; name one with --image-column")


def _holds_pictures(arrow_type: Any) -> bool:
    """An ``Image`` feature's struct (``bytes``, ``path``), image bytes, or paths."""
    import pyarrow as pa

    if pa.types.is_struct(arrow_type):
        return {arrow_type.field(k).name for k in range(arrow_type.num_fields)} >= {"bytes", "path"}
    texts = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)
    return any(check(arrow_type) for check in texts)


def _text_kind(arrow_type: Any) -> str | None:
    """``"text"`` for a string column, ``"list"`` for a column of lists of strings, else None."""
    import pyarrow as pa

    def text(kind: Any) -> bool:
        return pa.types.is_string(kind) or pa.types.is_large_string(kind)

    if text(arrow_type):
        return "text"
    lists = pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)
    return "list" if lists and text(arrow_type.value_type) else None


def row_base(split: str, row: int, value: object | None) -> str:
    """A row's id: the id column's ``value`` as text when there is one, else the row number
    (with ``split/`` before it for a ``DatasetDict``'s split)."""
    if value is not None:
        return value if isinstance(value, str) else str(value)
    return f"{split}/{row}" if split else str(row)


def row_pair_ids(split: str, part: Any, names: DatasetColumns) -> Iterator[tuple[str, list[str]]]:
    """Every row of ``part`` in order: its id (:func:`row_base`) and its pair ids, one per
    caption (a row whose caption is missing or an empty list still has one: ``base`` or
    ``base/0``)."""
    wanted = [c for c in (names.id, names.caption) if c is not None]
    row = 0
    for batch in part.select_columns(wanted).with_format("arrow").iter(BATCH_ROWS):
        ids = batch.column(names.id).to_pylist() if names.id else [None] * batch.num_rows
        captions = batch.column(names.caption).to_pylist() if names.listed else None
        for k in range(batch.num_rows):
            base = row_base(split, row, _id_cell(ids[k], names.id))
            if captions is None:
                yield base, [base]
            else:
                yield base, [f"{base}/{j}" for j in range(max(1, len(captions[k] or [])))]
            row += 1


def _id_cell(value: object, column: str | None) -> object | None:
    """An id cell (None when there is no id column; a missing value is the empty id)."""
    if column is None:
        return None
    return "" if value is None else value

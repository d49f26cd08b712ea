"""Writers of cleaned collections, one per form a collection is read in (the counterpart of
:mod:`mispair.data.readers`): ``mispair apply`` writes the kept pairs in the collection's own form
— a table file as the same table, WebDataset shards as shards, a folder with a captions file
(``captions.csv`` / ``.tsv`` / ``.jsonl``) as the same folder, a Hugging Face imagefolder as an
imagefolder, COCO JSON as COCO JSON, a Hugging Face ``save_to_disk`` folder as one — or, with
``--format folder`` (and for a DataFrame's audit, an audit without its run, or a form without a
writer), as apply's plain folder of pictures and ``captions.csv``. Beside either: ``keep.csv``,
``removed.csv`` and the keep-lists (:mod:`mispair.audit.writers.keep_lists`).

The form and the columns are those the audit read the collection with (its run's
``config.json``: ``data.source`` and the column options), so a writer finds the pair ids the
reader found.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mispair.audit.audit_folder import read_run_data
from mispair.audit.writers.base import Decided, WriteRequest, Written, own_name
from mispair.audit.writers.coco import write_coco
from mispair.audit.writers.hf import write_dataset
from mispair.audit.writers.imagefolder import folder_form, write_folder
from mispair.audit.writers.keep_lists import KEEP_LISTS, write_keep_lists
from mispair.audit.writers.table import write_table_file
from mispair.audit.writers.webdataset import write_shards
from mispair.data.readers.columns import Columns
from mispair.errors import ConfigError, DataError
from mispair.registry import Registry

__all__ = [
    "FORMATS",
    "KEEP_LISTS",
    "WRITERS",
    "CollectionForm",
    "Decided",
    "WriteRequest",
    "WriterForm",
    "Written",
    "collection_form",
    "parse_bytes",
    "write_keep_lists",
]

FORMATS = ("same", "folder")
"""``--format``: the collection's own form (``same``), or apply's plain folder."""
COLUMN_KEYS = ("image_column", "caption_column", "id_column", "split_column")


def _write_table(request: WriteRequest, folder: Path) -> Written:
    own_name(request.collection)
    written = write_table_file(
        request.collection, folder / request.collection.name, request.columns, request.decided
    )
    counts = request.link_pictures(folder, written.files)
    written.linked, written.copied = counts.get("linked", 0), counts.get("copied", 0)
    return written


@dataclass(frozen=True)
class WriterForm:
    """The writer of the collections one reader (``data.source``) reads: the ``name`` of the
    form written, its ``write`` function, whether the kept pictures are linked beside it
    (``pictures``; never for image bytes unpacked into mispair's cache), whether its pair ids are
    ``shard/key``, whether it writes the collection at hand (``writes``; else apply's plain
    folder), and the form's name for a given collection (``named``; else ``name``)."""

    name: str
    write: Callable[[WriteRequest, Path], Written]
    pictures: bool = True
    shard_keys: bool = False
    writes: Callable[[Path], bool] = lambda collection: True
    named: Callable[[Path], str] | None = None


WRITERS: Registry[WriterForm] = Registry("collection writer", "data.source")
"""The writers by the reader (``data.source``) the audit read the collection with: a new form
apply writes in its own form is one entry here (and one module beside this one)."""
WRITERS.register("table")(WriterForm("table", _write_table))
WRITERS.register("webdataset")(WriterForm("webdataset", write_shards, pictures=False, shard_keys=True))
WRITERS.register("coco")(WriterForm("coco", write_coco))
WRITERS.register("folder")(WriterForm("folder", write_folder, named=folder_form))
WRITERS.register("hf")(WriterForm("hf", write_dataset, pictures=False))


@dataclass(frozen=True)
class CollectionForm:
    """How a cleaned collection of one form is written: ``name`` (``table``, ``webdataset``,
    ``folder``, ``imagefolder``, ``coco``), its ``write`` function, whether the kept ``pictures`` are linked
    beside it (not for image bytes or shards), whether its pair ids are ``shard/key``, and the
    ``columns`` the audit read it with."""

    name: str
    write: Callable[[WriteRequest, Path], Written]
    pictures: bool
    shard_keys: bool
    columns: Columns


def collection_form(summary: dict[str, Any], format: str = "same") -> CollectionForm | None:
    """The form apply writes the audited collection in, or None for apply's plain folder
    (``format="folder"``, a DataFrame's audit, an audit without
    its run's config, a collection gone since the audit, a form without a writer).

    The summary and the run's config are untrusted (an audit folder may come from anyone): the
    config is read as :func:`~mispair.audit.audit_folder.read_run_data` says (a regular bounded
    file, naming the summary's collection); the collection must still be of the form the audit
    read it as, and the pictures linked beside it must lie inside it (or inside the folder its run
    read them from). Anything else is a one-line :class:`~mispair.errors.DataError`, before
    anything is written."""
    if format not in FORMATS:
        raise ConfigError(f"--format: one of {', '.join(FORMATS)}, got {format!r}")
    if format == "folder":
        return None
    collection = Path(summary["collection"])
    if collection.is_file():
        own_name(collection)  # before anything is read or written
    data = read_run_data(summary)
    run = summary.get("run")
    if data is None or (run and collection.resolve().is_relative_to(Path(run).resolve().parent)):
        return None
    source = data.get("source")
    if source not in WRITERS.names() or not _still_of_form(collection, source):
        return None
    writer = WRITERS.get(source)
    if not writer.writes(collection):
        return None
    pictures = writer.pictures and not _under_cache(summary.get("image_root"))
    if pictures:
        _check_picture_root(summary, data, collection)
    columns = Columns(**{key.removesuffix("_column"): data.get(key) for key in COLUMN_KEYS})
    name = writer.named(collection) if writer.named else writer.name
    return CollectionForm(name, writer.write, pictures, writer.shard_keys, columns)


def _still_of_form(collection: Path, source: str) -> bool:
    """Whether ``collection`` is still what the reader ``source`` reads: False when it is gone
    (moved since the audit: apply's plain folder); a collection there but of another form is a
    :class:`DataError` (the run's ``data.source`` altered, or the collection replaced)."""
    from mispair.data.readers import READERS

    if READERS.get(source)().detect(collection):
        return True
    if not os.path.lexists(collection) and "{" not in collection.name:
        return False
    raise DataError(
        f"{collection}: not a {source} collection, but the audit's run read it as one; the "
        "collection changed since the audit, or the audit was altered (audit it again, or give "
        "--format folder)"
    )


def _check_picture_root(summary: dict[str, Any], data: dict[str, Any], collection: Path) -> None:
    """The audit's image root lies inside the collection (its folder, or the folder of its file)
    or inside the run's ``data.image_root``: the pictures linked beside the collection's own
    form are the collection's, at the names its file gives them."""
    root = summary.get("image_root")
    if root is None:
        return
    named = data.get("image_root")
    base = Path(named) if named and "\0" not in named and Path(named).is_absolute() else None
    if base is None:
        base = collection if collection.is_dir() else collection.parent
    if not Path(root).resolve().is_relative_to(base.resolve()):
        raise DataError(
            f"{root}: the audit's image root is not inside the collection {str(collection)!r} "
            f"(nor the folder its run read the pictures from); a tampered audit, or give --format folder"
        )


def _under_cache(image_root: str | None) -> bool:
    """The audit's pictures are mispair's unpacked copies (image bytes), not the collection's files."""
    from mispair.data.cache_folder import cache_root

    return image_root is not None and Path(image_root).resolve().is_relative_to(cache_root().resolve())


UNITS = {"": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9}


def parse_bytes(text: str | int | None) -> int | None:
    """A size such as ``100MB``, ``1.5G`` or ``4096`` in bytes (None stays None)."""
    if text is None or isinstance(text, int):
        return text
    number = text.strip().lower()
    number = number[:-1] if number.endswith(("kb", "mb", "gb")) else number
    unit = next((u for u in ("k", "m", "g") if number.endswith(u)), "")
    try:
        value = float(number[: len(number) - len(unit)]) * UNITS[unit]
    except ValueError:
        raise ConfigError(f"--shard-size: a size such as 100MB or 1G, got {text!r}") from None
    if value < 10_240:
        raise ConfigError(f"--shard-size: at least 10KB (a tar file's smallest), got {text!r}")
    return int(value)

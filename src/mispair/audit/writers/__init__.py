"""Writers of cleaned collections, one per form a collection is read in (the counterpart of
:mod:`mispair.data.readers`): ``mispair apply`` writes the kept pairs in the collection's own
form — a table file as the same table, WebDataset shards as shards, a Hugging Face imagefolder as
an imagefolder, COCO JSON as COCO JSON — or, with ``--format folder`` (and for a folder with a
captions file, a DataFrame's audit, or a form without a writer), as apply's plain folder of
pictures and ``captions.csv``. Beside either: ``keep.csv``, ``removed.csv`` and the keep-lists
(:mod:`mispair.audit.writers.keep_lists`).

The form and the columns are those the audit read the collection with (its run's
``config.json``: ``data.source`` and the column options), so a writer finds the pair ids the
reader found.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mispair.audit.writers.base import Decided, WriteRequest, Written, own_name
from mispair.audit.writers.coco import write_coco
from mispair.audit.writers.imagefolder import is_imagefolder, write_imagefolder
from mispair.audit.writers.keep_lists import KEEP_LISTS, write_keep_lists
from mispair.audit.writers.table import write_table_file
from mispair.audit.writers.webdataset import write_shards
from mispair.data.readers.columns import Columns
from mispair.errors import ConfigError, DataError

__all__ = [
    "FORMATS",
    "KEEP_LISTS",
    "CollectionForm",
    "Decided",
    "WriteRequest",
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
    counts = request.link_pictures(folder)
    written.linked, written.copied = counts.get("linked", 0), counts.get("copied", 0)
    return written


@dataclass(frozen=True)
class CollectionForm:
    """How a cleaned collection of one form is written: ``name`` (``table``, ``webdataset``,
    ``imagefolder``, ``coco``), its ``write`` function, whether the kept ``pictures`` are linked
    beside it (not for image bytes or shards), whether its pair ids are ``shard/key``, and the
    ``columns`` the audit read it with."""

    name: str
    write: Callable[[WriteRequest, Path], Written]
    pictures: bool
    shard_keys: bool
    columns: Columns


def collection_form(summary: dict[str, Any], format: str = "same") -> CollectionForm | None:
    """The form apply writes the audited collection in, or None for apply's plain folder
    (``format="folder"``, a folder with a captions file, a DataFrame's audit, an audit without
    its run's config, a form without a writer)."""
    if format not in FORMATS:
        raise ConfigError(f"--format: one of {', '.join(FORMATS)}, got {format!r}")
    if format == "folder":
        return None
    data = _run_data(summary)
    collection = Path(summary["collection"])
    run = summary.get("run")
    if data is None or (run and collection.resolve().is_relative_to(Path(run).resolve().parent)):
        return None
    columns = Columns(**{key.removesuffix("_column"): data.get(key) for key in COLUMN_KEYS})
    pictures = not _under_cache(summary.get("image_root"))
    source = data.get("source")
    if source in ("table", "coco") and collection.is_file():
        own_name(collection)  # before anything is written
    if source == "table" and collection.is_file():
        return CollectionForm("table", _write_table, pictures, False, columns)
    if source == "webdataset":
        return CollectionForm("webdataset", write_shards, False, True, columns)
    if source == "coco" and collection.is_file():
        return CollectionForm("coco", write_coco, pictures, False, columns)
    if source == "folder" and collection.is_dir() and is_imagefolder(collection):
        return CollectionForm("imagefolder", write_imagefolder, pictures, False, columns)
    return None


def _run_data(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The ``data`` section of the audit's run config, its column options strings or None."""
    from mispair.limits import limit
    from mispair.safe_io import read_input
    from mispair.safe_parse import load_json

    if not summary.get("run"):
        return None
    path = Path(summary["run"]) / "config.json"
    try:
        config = load_json(read_input(path, limit("MAX_CONFIG_BYTES"), "a run config", links=False), path)
    except DataError:
        return None
    data = config.get("data") if isinstance(config, dict) else None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), (str, type(None))) for k in COLUMN_KEYS):
        return None
    return data


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

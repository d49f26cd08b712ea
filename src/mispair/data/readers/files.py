"""Table files (``.csv``, ``.tsv``, ``.jsonl``, ``.parquet``) read into a
:class:`~mispair.data.readers.table.CollectionTable`, with pandas and pyarrow.

The image column holds a path relative to the table's folder (or ``data.image_root``), or the
image itself: raw bytes, or the ``{"bytes": ..., "path": ...}`` struct the ``datasets`` library
writes to Parquet (read with pyarrow alone). Image bytes are unpacked once into the cache folder
(``images/<digest><ext>``), named by their content, so equal pictures are one image.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.atomic import atomic_write
from mispair.data.readers.columns import Columns
from mispair.data.readers.embeddings import EMBEDDING_FIELDS, embedding_cells, vector_id
from mispair.data.readers.table import CollectionTable, checked_table
from mispair.errors import DataError
from mispair.limits import limit, raise_hint

if TYPE_CHECKING:
    import pandas as pd


TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".parquet")
IMAGE_MAGIC = (
    (b"\x89PNG", ".png"),
    (b"\xff\xd8\xff", ".jpg"),
    (b"GIF8", ".gif"),
    (b"BM", ".bmp"),
    (b"RIFF", ".webp"),
    (b"<svg", ".svg"),
    (b"<?xml", ".svg"),
)


def read_frame(path: Path) -> pd.DataFrame:
    """The table at ``path`` as read, every cell a string but for image bytes."""
    import pandas as pd

    size = path.stat().st_size
    bound = limit("MAX_TABLE_BYTES")
    if size > bound:
        raise DataError(
            f"{path}: {size:,} bytes, more than the {bound:,} read at once; split it, or "
            f"{raise_hint('MAX_TABLE_BYTES')}"
        )
    suffix = path.suffix.lower()
    try:
        if suffix in (".csv", ".tsv"):
            return pd.read_csv(
                path,
                sep="\t" if suffix == ".tsv" else ",",
                dtype=str,
                keep_default_na=False,
                encoding="utf-8-sig",
                engine="python" if suffix == ".tsv" else "c",
            )
        if suffix == ".jsonl":
            return _read_jsonl(path)
        if suffix == ".parquet":
            return _read_parquet(path)
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path}: not UTF-8 text (cannot decode byte 0x{exc.object[exc.start]:02x}); save it as UTF-8"
        ) from None
    except (pd.errors.ParserError, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: not a readable {suffix[1:]} table ({first})") from None
    raise DataError(
        f"{path}: unknown table format {suffix or 'without suffix'!r} (use {', '.join(TABLE_SUFFIXES)})"
    )


def _read_jsonl(path: Path) -> pd.DataFrame:
    import pandas as pd

    rows = []
    bound = limit("MAX_LINE_CHARS")
    with open(path, encoding="utf-8-sig") as lines:
        for n, line in enumerate(iter(lambda: lines.readline(bound + 1), ""), start=1):
            if len(line.rstrip("\n")) > bound:  # never more than the bound read into memory
                raise DataError(
                    f"{path}:{n}: a line of more than {bound:,} characters ({raise_hint('MAX_LINE_CHARS')})"
                )
            if line.strip():
                try:
                    row = json.loads(line)
                except ValueError:
                    row = None
                if not isinstance(row, dict):
                    raise DataError(f"{path}:{n}: not a JSON object")
                rows.append({key: _text(value) for key, value in row.items()})
    return pd.DataFrame(rows)


def _read_parquet(path: Path) -> pd.DataFrame:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return table.to_pandas(types_mapper=None).astype({name: object for name in table.column_names})


def _text(value: Any) -> Any:
    """A JSON cell as text (numbers as written), nested image structs kept."""
    if value is None:
        return ""
    if isinstance(value, (dict, bytes)):
        return value
    return value if isinstance(value, str) else json.dumps(value)


def frame_table(
    frame: pd.DataFrame, columns: Columns, image_root: Path, cache_dir: Path, where: str
) -> CollectionTable:
    """The :class:`CollectionTable` of a table read as ``frame`` (its columns named or detected;
    pair ids from the id column, else the row number from 0; vectors of embedding columns, see
    :mod:`~mispair.data.readers.embeddings`, with image ids from the image vectors when no image
    column is given)."""
    import pandas as pd

    names = columns.resolve([str(c) for c in frame.columns], where)
    rows = pd.Series(range(len(frame)), index=frame.index).astype(str)
    ids = frame[names.id].map(_cell) if names.id else rows
    vectors = {
        field: embedding_cells(frame[column], ids, image_root, column, where)
        for field in EMBEDDING_FIELDS
        if (column := getattr(names, field)) is not None
    }
    if names.image is None:
        images = pd.Series([vector_id(v) for v in vectors["image_embedding"]], index=frame.index)
    else:
        images = frame[names.image]
    unpack = "image_embedding" not in vectors and images.map(_holds_bytes).any()
    refused: list[dict] = []
    if unpack:
        images = _unpack_images(images, ids, frame[names.caption], cache_dir, refused)
    plain = pd.DataFrame(
        {
            "pair_id": ids.astype(str).values,
            "image": images.map(_cell).values,
            "caption": frame[names.caption].map(_cell).values,
            "split": frame[names.split].map(_cell).values if names.split else "",
            **{field: pd.Series(values, dtype=object).values for field, values in vectors.items()},
        }
    )
    if refused:
        plain = plain[~plain["pair_id"].isin({r["pair_id"] for r in refused})]
    root = cache_dir / "images" if unpack else image_root
    return checked_table(plain, root, where, trusted_paths=bool(unpack), refused=refused)


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return value if isinstance(value, str) else str(value)


def _holds_bytes(value: Any) -> bool:
    return isinstance(value, (bytes, bytearray)) or (isinstance(value, dict) and bool(value.get("bytes")))


def _unpack_images(
    images: pd.Series, ids: pd.Series, captions: pd.Series, cache_dir: Path, refused: list[dict]
) -> pd.Series:
    """Each cell's image bytes written once to ``cache_dir/images/<digest><ext>``; the relative
    names returned (rows without bytes refused)."""
    folder = cache_dir / "images"
    names = []
    for pair_id, value, caption in zip(ids, images, captions):
        if not _holds_bytes(value):
            refused.append(
                {
                    "pair_id": str(pair_id),
                    "image": _cell(value if not isinstance(value, dict) else value.get("path")),
                    "caption": _cell(caption),
                    "reason": "no image bytes in a column of image bytes",
                }
            )
            names.append("")
            continue
        blob = bytes(value["bytes"] if isinstance(value, dict) else value)
        hint = Path(str(value.get("path") or "")).suffix.lower() if isinstance(value, dict) else ""
        names.append(write_image_bytes(folder, blob, hint))
    return images.__class__(names, index=images.index)


def write_image_bytes(folder: Path, blob: bytes, suffix: str = "") -> str:
    """``blob`` saved as ``folder/<digest><ext>`` (unless there already); the file name. The
    extension is ``suffix`` when given, else sniffed from the bytes (``.bin`` when unknown, which
    no decoder reads)."""
    if not suffix:
        suffix = next((ext for magic, ext in IMAGE_MAGIC if blob.startswith(magic)), ".bin")
    name = hashlib.sha256(blob).hexdigest()[:32] + suffix
    path = folder / name
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: f.write(blob))
    return name

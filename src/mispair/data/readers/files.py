"""Table files (``.csv``, ``.tsv``, ``.jsonl``, ``.parquet``) read into a
:class:`~mispair.data.readers.table.CollectionTable`, with pandas and pyarrow.

The image column holds a path relative to the table's folder (or ``data.image_root``), or the
image itself: raw bytes, or the ``{"bytes": ..., "path": ...}`` struct the ``datasets`` library
writes to Parquet (read with pyarrow alone). Image bytes are unpacked once into the cache folder
(``images/<digest><ext>``), named by their content, so equal pictures are one image; the image's
id (in the report, ``pairs.csv``, search hits and ``mispair apply``'s folder) is what the input
calls it — the struct's ``path``, else the id column's value — and the content digest only when
it has no name (:func:`unpacked_view`).
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, NamedTuple

from mispair.atomic import atomic_write
from mispair.data.cache_files import Rejected, discard_entry
from mispair.data.cache_folder import private_folder
from mispair.data.readers.columns import Columns
from mispair.data.readers.embeddings import EMBEDDING_FIELDS, embedding_cells, vector_id
from mispair.data.readers.table import CollectionTable, checked_table
from mispair.errors import DataError
from mispair.limits import limit, raise_hint
from mispair.safe_io import open_input
from mispair.safe_parse import check_rows, read_parquet_bounded

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

    bound = limit("MAX_TABLE_BYTES")
    os.close(open_input(path, bound, "a table", hint=f"split it, or {raise_hint('MAX_TABLE_BYTES')}"))
    suffix = path.suffix.lower()
    try:
        if suffix in (".csv", ".tsv"):
            _check_lines(path)
            # a long caption is read, then cut like every caption (not a refused file)
            csv.field_size_limit(max(csv.field_size_limit(), limit("MAX_LINE_CHARS")))
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
    except RecursionError:
        raise DataError(f"{path}: nested too deep to read as a table") from None
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
                except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
                    row = None
                if not isinstance(row, dict):
                    raise DataError(f"{path}:{n}: not a JSON object")
                if len(rows) >= limit("MAX_TABLE_ROWS"):
                    check_rows(len(rows) + 1, path)
                rows.append({key: _text(value) for key, value in row.items()})
    return pd.DataFrame(rows)


def _read_parquet(path: Path) -> pd.DataFrame:
    frame = read_parquet_bounded(path, "a table")
    return frame.astype({name: object for name in frame.columns})


def _check_lines(path: Path) -> None:
    """Refuse a text table of more than ``MAX_TABLE_ROWS`` lines, counted before it is parsed."""
    lines = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            lines += chunk.count(b"\n")
    check_rows(max(lines - 1, 0), path)


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
    root, own = image_root, dict[str, list[str]]()
    if unpack:
        named = ids if names.id else None
        unpacked = _unpack_images(images, ids, named, frame[names.caption], cache_dir, refused)
        root, images = unpacked.folder, pd.Series(unpacked.image_ids, index=frame.index)
        own = {"image_name": unpacked.names}
    plain = pd.DataFrame(
        {
            "pair_id": ids.astype(str).values,
            "image": images.map(_cell).values,
            "caption": frame[names.caption].map(_cell).values,
            "split": frame[names.split].map(_cell).values if names.split else "",
            **{field: pd.Series(values, dtype=object).values for field, values in vectors.items()},
            **own,
        }
    )
    if refused:
        plain = plain[~plain["pair_id"].isin({r["pair_id"] for r in refused})]
    return checked_table(plain, root, where, trusted_paths=bool(unpack), refused=refused)


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return value if isinstance(value, str) else str(value)


def _holds_bytes(value: Any) -> bool:
    """The cell is a picture's bytes, or a struct with a ``bytes`` field (of any value: a field
    of the wrong type is a refused row, see :func:`_image_bytes`)."""
    if isinstance(value, (bytes, bytearray)):
        return True
    blob = value.get("bytes") if isinstance(value, dict) else None
    if blob is None or (isinstance(blob, (int, float)) and blob == 0):
        return False
    return not hasattr(blob, "__len__") or len(blob) > 0


def _image_bytes(value: Any) -> bytes | str:
    """The picture's bytes in the cell, or why there are none: the ``bytes`` field must be bytes
    (a number would be that many zero bytes, a string or a list is not a picture) and no larger
    than ``MAX_IMAGE_BYTES``, checked before a copy is made."""
    blob = value.get("bytes") if isinstance(value, dict) else value
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        return f"image bytes of type {type(blob).__name__}, not bytes"
    if len(blob) > limit("MAX_IMAGE_BYTES"):
        return f"image larger than {limit('MAX_IMAGE_BYTES'):,} bytes ({raise_hint('MAX_IMAGE_BYTES')})"
    return bytes(blob)


def _struct_path(value: Any) -> str:
    """A struct's ``path``, when it is text a file name can be (no NUL, not too long)."""
    path = value.get("path") if isinstance(value, dict) else None
    return path if isinstance(path, str) and "\0" not in path and len(path) <= 4096 else ""


def _unpack_images(
    images: pd.Series,
    ids: pd.Series,
    named: pd.Series | None,
    captions: pd.Series,
    cache_dir: Path,
    refused: list[dict],
) -> Unpacked:
    """Each cell's image bytes written once to ``cache_dir/images/<digest><ext>``; the folder
    where each picture is a file named by its id, the ids and each row's own name
    (:func:`unpacked_view`: the cell's ``path``, else the value of the id column ``named``), rows
    without bytes refused."""
    folder = cache_dir / "images"
    names, wanted = [], []
    for k, (pair_id, value, caption) in enumerate(zip(ids, images, captions)):
        path = _struct_path(value)
        wanted.append(path or ("" if named is None else _cell(named.iat[k])))
        blob = _image_bytes(value) if _holds_bytes(value) else "no image bytes in a column of image bytes"
        if isinstance(blob, str):
            refused.append(
                {
                    "pair_id": str(pair_id),
                    "image": path if isinstance(value, dict) else _cell(value)[:200],
                    "caption": _cell(caption),
                    "reason": blob,
                }
            )
            names.append("")
            continue
        hint = Path(path).suffix.lower()[:10] if path else ""
        names.append(write_image_bytes(folder, blob, hint))
    return unpacked_view(cache_dir, wanted, names)


class Unpacked(NamedTuple):
    """:func:`unpacked_view`'s answer: the ``folder`` where each name is a picture's file, each
    row's ``image_ids`` (the picture's identity: rows of one picture share it) and each row's own
    ``names`` for its picture (what the row itself calls it; its image id unless it calls the same
    bytes otherwise than the picture's first row)."""

    folder: Path
    image_ids: list[str]
    names: list[str]


def unpacked_view(cache_dir: Path, wanted: list[str], stored: list[str]) -> Unpacked:
    """The image ids and names of unpacked pictures and the folder where each is the picture's file.

    ``stored[i]``: row ``i``'s picture in ``cache_dir/images`` (:func:`write_image_bytes`; ""
    for a row refused); ``wanted[i]``: what the input calls it (a WebDataset key, a path, an id;
    "" for nothing). The rows of one picture share the id of the first; the id is ``wanted``
    made a safe relative path (given the picture's extension when it has none), else
    ``<name>-<digest8><ext>`` when another picture has that name, else the content name. A row
    that calls the same bytes by another name keeps that name as its own (made safe and unique
    alike, after every id is given, so ids never depend on it): the report, ``pairs.csv`` and
    ``apply`` show each row's own name while the audit reads one picture. The folder is
    ``cache_dir/views/<digest of every name and picture>/``, each name a hard link to its
    picture (a copy where the file system has no links): one view per collection, shared by no
    other; a file there that is not its picture is replaced (with the pictures
    :func:`write_image_bytes` found changed, said in one warning line). Refused rows keep
    ``wanted`` as their id and name."""
    names = _Names()
    id_of: dict[str, str] = {}
    name_of: dict[tuple[str, str], str] = {}  # (what a row calls its picture, the picture)
    for want, content in zip(wanted, stored):
        if content and content not in id_of:
            id_of[content] = name_of[(want, content)] = names.give(want, content)
    for want, content in zip(wanted, stored):
        if content and (want, content) not in name_of:
            own = _plain_name(want)
            alias = (
                own
                and own != id_of[content]
                and own != PurePosixPath(id_of[content]).with_suffix("").as_posix()
            )
            name_of[(want, content)] = names.give(want, content) if alias else id_of[content]
    listing = "\n".join(f"{name}\t{content}" for name, content in names.content_of.items())
    digest = hashlib.blake2b(listing.encode("utf-8", "surrogateescape"), digest_size=12)
    view = private_folder(cache_dir / "views", "cache of unpacked images") / digest.hexdigest()
    for name, content in names.content_of.items():
        _link(cache_dir / "images" / content, view / name)
    _CHANGED.warn()
    rows = list(zip(wanted, stored))
    ids = [id_of[content] if content else want for want, content in rows]
    return Unpacked(view, ids, [name_of[row] if row[1] else row[0] for row in rows])


class _Names:
    """The names given in one view so far: none is another's folder, none given twice."""

    def __init__(self) -> None:
        self.content_of: dict[str, str] = {}
        self.folders: set[str] = set()

    def give(self, want: str, content: str) -> str:
        """The first of :func:`_id_choices` still free, now taken by ``content``."""
        name = next(c for c in _id_choices(want, content) if self._free(c))
        self.content_of[name] = content
        self.folders.update(p.as_posix() for p in PurePosixPath(name).parents)
        return name

    def _free(self, name: str) -> bool:
        """``name`` is neither a name already given nor a folder of one, and none of its
        folders is a name."""
        parents = {p.as_posix() for p in PurePosixPath(name).parents}
        taken = self.content_of.keys()
        return name not in taken and name not in self.folders and not parents & taken


def _plain_name(want: str) -> str:
    """``want`` as a safe relative path (no empty, ``.`` or ``..`` parts, no NUL, within the file
    system's lengths), or "" when nothing of it can be a name."""
    parts = [p for p in want.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    name = "/".join(parts)
    fits = "\x00" not in name and len(os.fsencode(name)) < 1024 and all(len(p) < 200 for p in parts)
    return name if name and fits else ""


def _id_choices(want: str, content: str) -> Iterator[str]:
    name = _plain_name(want)
    if name:
        name = name if PurePosixPath(name).suffix else name + Path(content).suffix
        yield name
        stem = PurePosixPath(name)
        yield str(stem.with_name(f"{stem.stem}-{content[:8]}{stem.suffix}"))
    yield content
    yield from (f"{n}-{content}" for n in itertools.count(2))


_CHANGED = Rejected("cache of unpacked images")
"""The unpacked pictures found changed since they were written (replaced, then warned about)."""


def _link(source: Path, target: Path) -> None:
    """``target`` made the picture ``source`` (a hard link, else a copy), unless it is already:
    anything else there (another file, a link, a FIFO) is replaced."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        info = None
    if info is not None:
        if stat.S_ISREG(info.st_mode) and (
            os.path.samestat(info, os.stat(source)) or _holds(target, source.read_bytes())
        ):
            return
        _CHANGED.entries.append((target, "not the picture it names"))
        discard_entry(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except FileExistsError:
        return
    except OSError:
        atomic_write(target, lambda f: f.write(source.read_bytes()))


def write_image_bytes(folder: Path, blob: bytes, suffix: str = "") -> str:
    """``blob`` saved as ``folder/<digest><ext>`` (unless there already); the file name. The
    extension is ``suffix`` when given, else sniffed from the bytes (``.bin`` when unknown, which
    no decoder reads)."""
    if not suffix:
        suffix = next((ext for magic, ext in IMAGE_MAGIC if blob.startswith(magic)), ".bin")
    name = hashlib.sha256(blob).hexdigest()[:32] + suffix
    if folder not in _PRIVATE:
        _PRIVATE.add(private_folder(folder, "cache of unpacked images"))
    path = folder / name
    if os.path.lexists(path) and not _holds(path, blob):  # replaced under its digest's name
        _CHANGED.entries.append((path, "its bytes are not those its name's digest says"))
    elif os.path.lexists(path):
        return name
    atomic_write(path, lambda f: f.write(blob))  # (replaces the name itself, never a link's target)
    return name


_PRIVATE: set[Path] = set()
"""The folders of unpacked pictures checked private in this process."""


def _holds(path: Path, blob: bytes) -> bool:
    """``path`` is a regular file (not a link) whose bytes are ``blob``."""
    from mispair.safe_io import read_input

    try:
        return read_input(path, len(blob), "an unpacked picture", links=False) == blob
    except DataError:
        return False

"""An index on disk: a folder of plain files named in ``manifest.json`` with their SHA-256 digests.

The folder is written under a temporary name and renamed into place
(:func:`mispair.atomic.atomic_directory`), so a reader never meets half an index. Reading checks
every file against its digest before parsing it, so a truncated or altered file is a one-line
error and never reaches the FAISS reader; arrays are ``.npy`` read with ``allow_pickle=False``,
metadata is JSON: nothing is unpickled.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from mispair.atomic import atomic_directory
from mispair.errors import DataError
from mispair.limits import limit, raise_hint
from mispair.safe_io import read_input
from mispair.safe_parse import load_json

MANIFEST = "manifest.json"
FORMAT = "mispair-index"
VERSION = 1


def write_index_folder(path: str | Path, manifest: dict[str, Any], files: dict[str, bytes]) -> None:
    """Write ``files`` (name → content) and a manifest (``manifest`` plus the format, version and
    the files' digests) to the folder ``path``, atomically; an older index there is replaced."""

    def write(folder: Path) -> None:
        for name, data in files.items():
            (folder / name).write_bytes(data)
        digests = {name: _digest(data) for name, data in files.items()}
        sizes = {name: len(data) for name, data in files.items()}
        text = json.dumps(
            {"format": FORMAT, "version": VERSION, **manifest, "files": digests, "sizes": sizes},
            indent=2,
            ensure_ascii=False,
        )
        (folder / MANIFEST).write_text(text + "\n", encoding="utf-8")

    atomic_directory(path, write, what="mispair index", replaceable=_only_index_files)


def check_index_target(path: str | Path) -> None:
    """Refuse, before an index is built, a ``path`` it could not be written to: a file, a link, or
    a folder holding anything but an older index (nothing is written)."""
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise DataError(f"{path}: exists and is not a folder; choose another path for the mispair index")
    if path.is_dir() and any(path.iterdir()) and not _only_index_files(path):
        raise DataError(f"{path}: a folder that does not hold a mispair index; choose another path")


def _only_index_files(path: Path) -> bool:
    """``path`` holds an index and nothing else (a rebuild deletes no file it did not write)."""
    if not (path / MANIFEST).is_file():
        return False
    try:
        own = {MANIFEST, *_read_manifest(path / MANIFEST)["files"]}
    except (DataError, KeyError, TypeError):
        return False
    others = sorted(p.name for p in path.iterdir() if p.name not in own)
    if others:
        raise DataError(
            f"{path}: holds files the index did not write (e.g. {others[0]!r}); move them "
            "out of the folder or choose another --out"
        )
    return True


def check_index_folder(path: str | Path) -> dict[str, Any]:
    """The manifest of the index folder ``path``, or a one-line error when there is none (what
    the command line checks before it loads torch and FAISS; :func:`read_index_folder` checks
    the files it names)."""
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"{path}: no such index (build one: mispair index CHECKPOINT DATA --out {path})")
    return _read_manifest(path / MANIFEST)


def read_index_folder(path: str | Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The manifest and the checked content of every file it names: each a regular file (no link,
    FIFO or device) of the size the manifest records (at most ``MAX_INDEX_FILE_BYTES`` where it
    records none), read once while its digest is computed, never past that size."""
    path = Path(path)
    manifest = check_index_folder(path)
    sizes = manifest.get("sizes") if isinstance(manifest.get("sizes"), dict) else {}
    files = {}
    for name, digest in manifest["files"].items():
        if not isinstance(name, str) or Path(name).name != name or name.startswith("."):
            raise DataError(f"{path / MANIFEST}: names a file outside the index ({name!r})")
        size = sizes.get(name)
        bound = size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None
        data = _read_checked(path / name, limit("MAX_INDEX_FILE_BYTES") if bound is None else bound)
        if (bound is not None and len(data) != bound) or _digest(data) != digest:
            raise DataError(
                f"{path / name}: corrupt (its content differs from the one the manifest "
                "records); rebuild the index with `mispair index`"
            )
        files[name] = data
    return manifest, files


def _read_checked(path: Path, bound: int) -> bytes:
    """``path``'s bytes: a regular file, not a link, of at most ``bound`` bytes (checked on the
    open file before a byte is read)."""
    try:
        return read_input(
            path, bound, "a file of the index", hint=raise_hint("MAX_INDEX_FILE_BYTES"), links=False
        )
    except DataError as exc:
        raise DataError(f"{exc}; rebuild the index with `mispair index`") from None


def _read_manifest(path: Path) -> dict[str, Any]:
    if not path.is_symlink() and not path.exists():
        raise DataError(f"{path.parent}: not a mispair index (no {MANIFEST})")
    manifest = load_json(_read_checked(path, limit("MAX_SUMMARY_BYTES")), path)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataError(f"{path}: not a mispair index manifest")
    if manifest.get("version") != VERSION:
        raise DataError(
            f"{path}: index format version {manifest.get('version')!r}, this mispair reads "
            f"{VERSION} (rebuild the index)"
        )
    if not isinstance(manifest.get("files"), dict):
        raise DataError(f"{path}: not a mispair index manifest (no file list)")
    return manifest


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def array_bytes(array: np.ndarray) -> bytes:
    """``array`` in the ``.npy`` format."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def array_from_bytes(data: bytes, where: str) -> np.ndarray:
    """The array of :func:`array_bytes` (never a pickled object: an object array is an error)."""
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise DataError(f"{where}: not a readable .npy array ({exc})") from None


def json_bytes(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False).encode("utf-8")


def json_from_bytes(data: bytes, where: str) -> Any:
    return load_json(data, where)

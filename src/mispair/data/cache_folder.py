"""Where mispair keeps what it derives from a collection: never inside the collection.

Image features, unpacked image bytes, caption vectors and a frozen text encoder's outputs are
kept in the user's cache folder, ``$MISPAIR_CACHE``, else ``$XDG_CACHE_HOME/mispair``, else
``~/.cache/mispair`` (the exported ONNX models live there too), in a folder per collection under
``collections/``; the config's ``data.cache_dir`` names another folder. Everything there is
named by what it was computed from (a picture's path, size and modification time; image bytes
by their digest; captions by their text), so two collections never collide, and the collection
itself is only read.
The cache folder is the user's alone (:func:`private_folder`: created ``0700``, refused when
another user owns it or others may write it), and every entry in it is checked on reading
(:mod:`mispair.data.cache_files`). A cache shipped inside a collection (``.mispair_cache``, a
precomputed set's ``cache``) is ignored unless ``data.cache_dir`` names it (:func:`shipped`).

>>> from mispair.config import DataConfig
>>> collection_cache(DataConfig(root="icons/", cache_dir="/tmp/features"))
PosixPath('/tmp/features')
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from mispair.errors import DataError

if TYPE_CHECKING:
    from mispair.config import DataConfig

ENVIRONMENT = "MISPAIR_CACHE"
"""The environment variable naming mispair's cache folder."""
COLLECTIONS = "collections"
"""The sub-folder of the cache folder that holds what is derived from collections."""


def cache_root() -> Path:
    """``$MISPAIR_CACHE``, else ``$XDG_CACHE_HOME/mispair``, else ``~/.cache/mispair``."""
    root = os.environ.get(ENVIRONMENT)
    if root:
        return Path(root).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mispair"


def onnx_location() -> Path:
    """``onnx/`` in :func:`cache_root`, neither made nor checked: where to look for an exported
    model without writing anything (:func:`onnx_folder` before one is run)."""
    return cache_root() / "onnx"


def onnx_folder() -> Path:
    """Where the exported ONNX models are kept and loaded from: :func:`onnx_location`, made and
    checked as :func:`private_folder` (a model file found there is run as it is, so no one else
    may have written it)."""
    return private_folder(onnx_location(), "ONNX model cache")


def collection_cache(data: DataConfig) -> Path:
    """Where what is derived from the collection of ``data`` is kept: ``data.cache_dir`` when
    given, else ``collections/<name>-<digest>/`` in :func:`cache_root`, one folder per
    collection (``name``: the last part of ``data.root``; ``digest``: of its absolute path), so
    that a run reads only its own collection's cache."""
    if data.cache_dir:
        return Path(data.cache_dir).expanduser()
    where = os.path.abspath(os.path.expanduser(str(data.root or "")))
    digest = hashlib.blake2b(os.fsencode(where), digest_size=8).hexdigest()
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(where).name)[:40].strip("._") or "collection"
    return cache_root() / COLLECTIONS / f"{name}-{digest}"


def shipped(folder: Path) -> list[Path]:
    """Nothing: a cache folder found inside a collection (``folder``: one an older mispair wrote
    beside the data, or one shipped with it) is never read unless ``data.cache_dir`` names it,
    since whoever wrote it decides what its entries say; one warning per folder and process
    says it is ignored."""
    try:
        found = folder.is_dir()
    except OSError:  # e.g. no permission to look: as if absent
        found = False
    if found and str(folder) not in _WARNED:
        _WARNED.add(str(folder))
        warnings.warn(
            f"{folder}: a cache folder inside the collection, ignored (mispair computes its own in "
            f"{cache_root()}; data.cache_dir={folder} reads it, every entry checked)",
            stacklevel=2,
        )
    return []


_WARNED: set[str] = set()


def private_folder(path: str | Path, what: str, top: str | Path | None = None) -> Path:
    """The folder ``path`` of the cache, created (with its missing parents up to ``top``) as
    ``0700``, after checking it and each folder between it and ``top`` (default: the cache root
    when ``path`` lies in it, else ``path`` alone): each must belong to this user and be writable
    by nobody else, since whoever may write the cache decides what mispair reads from it.

    Raises:
        DataError: a folder belongs to another user, others may write it, it is not a folder or
            cannot be created (one line naming it and the fix).
    """
    path = Path(path).expanduser()
    root = cache_root()
    top = Path(top) if top is not None else (root if path.is_relative_to(root) else path)
    chain = [path, *(p for p in path.parents if p.is_relative_to(top))]
    try:  # the folders above the cache: made as any folder is
        chain[-1].parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"{chain[-1]}: cannot create the {what} ({exc.strerror or exc})") from None
    for folder in reversed(chain):
        _make_private(folder, what)
    return path


def _make_private(folder: Path, what: str) -> None:
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise DataError(f"{folder}: cannot create the {what} ({exc.strerror or exc})") from None
    try:
        info = os.stat(folder)
    except OSError as exc:
        raise DataError(f"{folder}: cannot open the {what} ({exc.strerror or exc})") from None
    fix = f"set {ENVIRONMENT} (or data.cache_dir) to a folder of your own"
    if not stat.S_ISDIR(info.st_mode):
        raise DataError(f"{folder}: the {what} is not a folder; remove it or {fix}")
    if info.st_uid != os.geteuid():
        raise DataError(
            f"{folder}: the {what} belongs to another user (uid {info.st_uid}); mispair reads only "
            f"a cache of your own: {fix}"
        )
    if info.st_mode & 0o022:
        raise DataError(
            f"{folder}: the {what} may be written by other users (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"mispair reads only a cache of your own: chmod go-w {folder}, or {fix}"
        )

"""Where mispair keeps what it derives from a collection: never inside the collection.

Image features, unpacked image bytes, caption vectors and a frozen text encoder's outputs are
kept in the user's cache folder, ``$MISPAIR_CACHE``, else ``$XDG_CACHE_HOME/mispair``, else
``~/.cache/mispair`` (the exported ONNX models live there too), in a folder per collection under
``collections/``; the config's ``data.cache_dir`` names another folder. Everything there is
named by what it was computed from (a picture's path, size and modification time; image bytes
by their digest; captions by their text), so two collections never collide, and the collection
itself is only read.
A cache that an older mispair wrote beside the data (``.mispair_cache``, a precomputed set's
``cache``) is still read, never written.

>>> from mispair.config import DataConfig
>>> collection_cache(DataConfig(root="icons/", cache_dir="/tmp/features"))
PosixPath('/tmp/features')
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

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


def existing(*folders: Path) -> list[Path]:
    """The ``folders`` that exist (an older mispair's caches beside the data, read only)."""
    found = []
    for folder in folders:
        try:
            if folder.is_dir():
                found.append(folder)
        except OSError:  # e.g. no permission to look: as if absent
            continue
    return found

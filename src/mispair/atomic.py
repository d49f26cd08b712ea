"""Atomic file writes: a reader never sees half a file, and a failed write leaves no temp file."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from mispair.errors import DataError


def atomic_write(path: str | Path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write`` on a binary file beside ``path``, then rename it to ``path``.

    An operating-system failure (a missing folder, no permission, a full disk) becomes a one-line
    :class:`~mispair.errors.DataError` naming ``path``; on any failure the temporary file is removed
    and ``path`` keeps its previous content.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise DataError(f"{path}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_text(path: str | Path, text: str) -> None:
    """Write ``text`` as UTF-8 to ``path`` atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def ensure_directory(path: str | Path, what: str = "output folder") -> Path:
    """Create the folder ``path`` (and its parents) unless it exists; a path that is a file, lies
    under a file or cannot be created is a one-line :class:`~mispair.errors.DataError`."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise DataError(f"{path}: the {what} is a file")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"{path}: cannot create the {what} ({exc.strerror or exc})") from None
    if not os.access(path, os.W_OK):
        raise DataError(f"{path}: the {what} is not writable")
    return path

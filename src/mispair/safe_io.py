"""Opening output files without following links.

A link (or a FIFO, a device) planted in an output folder must never be written through: every
file mispair appends to or locks is opened with ``O_NOFOLLOW`` and must be a regular file, and
every file it replaces is written beside and renamed over (:mod:`mispair.atomic`), which replaces a
link itself, never its target.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import TextIO

from mispair.errors import DataError

_WRITE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_CREAT


def open_append(path: str | Path) -> TextIO:
    """``path`` opened to append UTF-8 text (created if missing), never through a link.

    Raises:
        DataError: ``path`` is a link, not a regular file, or cannot be opened (names the path).
    """
    return _open_regular(path, os.O_WRONLY | os.O_APPEND, "a")


def open_lock(path: str | Path) -> TextIO:
    """``path`` opened to read and write (created if missing, not truncated), never through a
    link: the file a lock is taken on."""
    return _open_regular(path, os.O_RDWR, "r+")


def _open_regular(path: str | Path, flags: int, mode: str) -> TextIO:
    return os.fdopen(_open_fd(path, flags), mode, encoding="utf-8")


def _open_fd(path: str | Path, flags: int) -> int:
    path = Path(path)
    try:
        fd = os.open(path, flags | _WRITE_FLAGS, 0o666)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise _link(path) from None
        if exc.errno == errno.ENXIO:  # a FIFO without a reader
            raise _not_regular(path) from None
        raise DataError(f"{path}: cannot open for writing ({exc.strerror or exc})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _not_regular(path)
    os.set_blocking(fd, True)
    return fd


def _link(path: Path) -> DataError:
    return DataError(
        f"{path}: a symbolic link; mispair never writes through a link in its output folder (remove the link)"
    )


def _not_regular(path: Path) -> DataError:
    return DataError(
        f"{path}: not a regular file; mispair writes only regular files in its output folder (remove it)"
    )


def refuse_planted(path: str | Path) -> None:
    """Refuse, before any work, a link or a non-regular file at ``path``, a file mispair will
    append to (a missing file is fine)."""
    path = Path(path)
    if path.is_symlink():
        raise _link(path)
    if path.exists() and not path.is_file():
        raise _not_regular(path)


def append_text(path: str | Path, text: str) -> None:
    """Append ``text`` to ``path`` (see :func:`open_append`) whole or not at all: when the write
    fails (a full disk), the file is cut back to its previous length and the failure is a
    one-line :class:`DataError` naming ``path``."""
    fd = _open_fd(path, os.O_WRONLY | os.O_APPEND)
    try:
        start = os.fstat(fd).st_size
        data = memoryview(text.encode("utf-8"))
        try:
            while data:
                data = data[os.write(fd, data) :]
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
            raise DataError(f"{path}: cannot write ({exc.strerror or exc})") from None
    finally:
        os.close(fd)

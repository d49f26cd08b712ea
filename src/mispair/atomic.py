"""Atomic file writes: a reader never sees half a file, and a failed write leaves no temp file."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from mispair.errors import DataError
from mispair.safe_io import open_lock


def atomic_write(path: str | Path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write`` on a binary file beside ``path``, then rename it to ``path``.

    The temporary file has a unique name and is created exclusively, so a file or link planted
    in the folder is never followed or overwritten (the rename replaces a link at ``path`` itself,
    not its target). An operating-system failure (a missing folder, no permission, a full disk, a
    read-only file system) becomes a one-line :class:`~mispair.errors.DataError` naming ``path``;
    on any failure the temporary file is removed and ``path`` keeps its previous content.
    """
    path = Path(path)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise DataError(f"{path}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        _remove(tmp)
        raise


def atomic_directory(
    path: str | Path, write: Callable[[Path], object], *, what: str, replaceable: Callable[[Path], bool]
) -> None:
    """Call ``write`` on a new, empty folder beside ``path``, then rename it to ``path``.

    A reader sees the previous folder or the complete new one, never a half-written one. An
    existing ``path`` is replaced only when it is an empty folder or ``replaceable(path)`` (e.g. it
    holds an older ``what``); anything else there is a one-line :class:`~mispair.errors.DataError`,
    as is an operating-system failure. On any failure the new folder is removed and ``path`` keeps
    its previous content.
    """
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise DataError(f"{path}: exists and is not a folder; choose another path for the {what}")
    if path.is_dir() and any(path.iterdir()) and not replaceable(path):
        raise DataError(f"{path}: a folder that does not hold a {what}; choose another path")
    ensure_directory(path.parent, f"folder of the {what}")
    tmp: Path | None = None
    try:
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
        os.chmod(tmp, 0o777 & ~_umask())
        write(tmp)
        _swap_in(tmp, path)
    except OSError as exc:
        _remove_tree(tmp)
        raise DataError(f"{path}: cannot write the {what} ({exc.strerror or exc})") from None
    except BaseException:
        _remove_tree(tmp)
        raise


def _swap_in(new: Path, path: Path) -> None:
    """Rename folder ``new`` to ``path``, moving a folder already there aside and deleting it."""
    if not path.exists():
        os.rename(new, path)
        return
    old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
    os.rename(path, old)  # replaces the empty folder just made
    try:
        os.rename(new, path)
    except OSError:
        os.rename(old, path)
        raise
    _remove_tree(old)


def _remove_tree(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _remove(tmp: str | None) -> None:
    if tmp is not None:
        with contextlib.suppress(OSError):  # e.g. a read-only file system: nothing was written
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def folder_lock(folder: str | Path) -> Iterator[None]:
    """Hold ``folder/.mispair.lock`` while the block runs: a second process asking for the same
    folder gets a one-line :class:`~mispair.errors.DataError` naming the holder's process id. A
    link or anything but a regular file at that name is refused, never followed."""
    path = Path(folder) / ".mispair.lock"
    with open_lock(path) as handle:  # never through a link planted in the folder
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise DataError(
                f"{folder}: in use by another mispair run (process {holder}); wait for it "
                "or choose another --out"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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

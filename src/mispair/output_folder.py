"""Output folders mispair owns: it never writes into, or deletes from, a folder of someone else's.

A folder is mispair's when it holds :data:`MARKER` (written when mispair creates or first fills
it), or (folders written before the marker existed) when everything in it is a file mispair
writes there. A non-empty folder of anything else is refused unless the user asks to overwrite;
even then only mispair's own files are replaced, nothing else there is touched.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Collection, Iterator
from pathlib import Path

from mispair.atomic import atomic_text, ensure_directory, folder_lock
from mispair.errors import DataError

MARKER = ".mispair-output"
"""The file that marks a folder as mispair's output (its content names the command)."""


def check_folder(folder: str | Path, own: Collection[str], *, overwrite: bool = False) -> None:
    """Refuse ``folder`` (writing nothing) unless it is missing, empty, marked as mispair's, holds
    only the names in ``own`` (what the command writes there), or ``overwrite`` is given.

    Raises:
        DataError: the folder is a link, a file, or someone else's.
    """
    folder = Path(folder)
    if folder.is_symlink():
        raise DataError(f"{folder}: the output folder is a symbolic link; give the real folder")
    if folder.exists() and not folder.is_dir():
        raise DataError(f"{folder}: the output folder is a file")
    marker = folder / MARKER
    if marker.is_symlink() or (marker.exists() and not marker.is_file()):
        raise DataError(f"{marker}: not a regular file; remove it")
    if folder.is_dir() and not marker.is_file() and not overwrite:
        others = [p.name for p in folder.iterdir() if not _mispairs(p.name, own)]
        if others:
            raise DataError(
                f"{folder}: a folder that mispair did not create (it holds {others[0]!r}); "
                "choose an empty or new --out, or add --overwrite to write mispair's files "
                "into it (nothing else there is touched)"
            )


def claim_folder(folder: str | Path, command: str, own: Collection[str], *, overwrite: bool = False) -> Path:
    """Make ``folder`` mispair's output folder for ``command`` (created and marked), or refuse it
    as :func:`check_folder` says. The caller has validated everything before: this writes."""
    check_folder(folder, own, overwrite=overwrite)
    folder = ensure_directory(folder)
    if not (folder / MARKER).is_file():
        atomic_text(folder / MARKER, f"mispair {command} output\n")
    return folder


def _mispairs(name: str, own: Collection[str]) -> bool:
    """``name`` is one of ``own``, mispair's lock, or a temporary file of one of them."""
    return name in own or name.startswith(".mispair") or any(name.startswith(f".{o}.") for o in own)


@contextlib.contextmanager
def holding(folder: str | Path) -> Iterator[Path]:
    """Hold ``folder``'s lock (created if missing) for the whole block, so a second command into
    it refuses at once, before any work. When the block fails and the folder was new and holds
    nothing but the lock, it is removed again (still held: a refused input leaves no folder
    behind); a command refused because another holds the folder leaves it as it is."""
    folder = Path(folder)
    created = not folder.exists()
    ensure_directory(folder)
    with folder_lock(folder):
        try:
            yield folder
        except BaseException:
            if created and {p.name for p in folder.iterdir()} <= {".mispair.lock"}:
                shutil.rmtree(folder, ignore_errors=True)
            raise

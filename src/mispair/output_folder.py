"""Output folders mispair owns: it never writes into, or deletes from, a folder of someone else's.

A folder is mispair's when it holds :data:`MARKER` (written when mispair creates or first fills
it), or (folders written before the marker existed) when everything in it is a file mispair
writes there. A non-empty folder of anything else is refused unless the user asks to overwrite;
even then only mispair's own files are replaced, nothing else there is touched.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from mispair.atomic import atomic_text, ensure_directory
from mispair.errors import DataError

MARKER = ".mispair-output"
"""The file that marks a folder as mispair's output (its content names the command)."""


def claim_folder(folder: str | Path, command: str, own: Collection[str], *, overwrite: bool = False) -> Path:
    """Make ``folder`` mispair's output folder for ``command``, or refuse it.

    A missing or empty folder is created and marked; a marked folder, or one holding only the
    names in ``own`` (what ``command`` writes there), is reused; any other non-empty folder is
    refused unless ``overwrite`` (then it is marked, and ``command`` replaces only its own files).
    The folder itself must not be a link.

    Raises:
        DataError: the folder is a link, a file, someone else's, or cannot be created.
    """
    folder = Path(folder)
    if folder.is_symlink():
        raise DataError(f"{folder}: the output folder is a symbolic link; give the real folder")
    ensure_directory(folder)
    marker = folder / MARKER
    if marker.is_symlink() or (marker.exists() and not marker.is_file()):
        raise DataError(f"{marker}: not a regular file; remove it")
    if not marker.is_file():
        others = [p.name for p in folder.iterdir() if not _mispairs(p.name, own)]
        if others and not overwrite:
            raise DataError(f"{folder}: a folder that mispair did not create (it holds {others[0]!r}); "
                            "choose an empty or new --out, or add --overwrite to write mispair's files "
                            "into it (nothing else there is touched)")  # fmt: skip
        atomic_text(marker, f"mispair {command} output\n")
    return folder


def _mispairs(name: str, own: Collection[str]) -> bool:
    """``name`` is one of ``own``, mispair's lock, or a temporary file of one of them."""
    return name in own or name.startswith(".mispair") or any(name.startswith(f".{o}.") for o in own)

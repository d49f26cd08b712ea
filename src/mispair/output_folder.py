"""Output folders mispair owns: it never writes into, or deletes from, a folder of someone else's.

A folder is mispair's when it holds :data:`MARKER` (written when mispair creates or first fills
it), or (folders written before the marker existed) when everything in it is a file mispair
writes there. A non-empty folder of anything else is refused unless the user asks to overwrite;
even then only mispair's own files are replaced, nothing else there is touched.

Output *files* named on the command line (``import``'s ``--out``, ``--labels``, ``--decisions``)
follow the same rules, checked by :func:`check_outputs` before any work: each is a distinct
file, none is one of the command's inputs, none is a link or a folder, and an existing one is
replaced only with ``--overwrite``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

from mispair.atomic import atomic_text, ensure_directory, folder_lock
from mispair.errors import ConfigError, DataError
from mispair.safe_io import shown

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


def check_outputs(
    outputs: Mapping[str, str | Path | None],
    *,
    overwrite: bool = False,
    inputs: Mapping[str, str | Path | None] | None = None,
) -> dict[str, Path]:
    """The output files ``outputs`` (option → path; None: not given) as paths, once each is known
    to be fit to write, before any work: two options naming one file (``a.csv`` and ``./a.csv``,
    a link to it, a hard link), an output that is one of the command's ``inputs`` (option →
    path), a symbolic link, a folder or anything but a regular file, and, unless ``overwrite``,
    an existing file are refused in one line naming the options.

    Raises:
        ConfigError: two outputs are one file, an output is an input, or an output exists.
        DataError: an output is a link, a folder or not a regular file.
    """
    given = {flag: Path(path) for flag, path in outputs.items() if path}
    sources = {flag: Path(path) for flag, path in (inputs or {}).items() if path}
    seen: dict[str, Path] = {}
    for flag, path in given.items():
        if path.is_symlink():
            raise DataError(
                f"{flag} {shown(path)}: a symbolic link; mispair never writes through a link "
                "(give the file itself)"
            )
        if path.exists() and not path.is_file():
            raise DataError(f"{flag} {shown(path)}: not a regular file (a folder?); give a file name")
        for other, earlier in [*seen.items(), *sources.items()]:
            if _same_file(path, earlier):
                which = f"{other} {shown(earlier)}" + (", which it reads" if other in sources else "")
                raise ConfigError(
                    f"{flag} {shown(path)}: the same file as {which}; give each output a file of its own"
                )
        if path.exists() and not overwrite:
            raise ConfigError(f"{flag} {shown(path)}: exists; give another file name or --overwrite")
        seen[flag] = path
    return given


def _same_file(a: Path, b: Path) -> bool:
    """``a`` and ``b`` name one file: the same path once resolved, or (both there) one inode."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False

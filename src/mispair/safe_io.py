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
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from mispair.errors import DataError, terminal_safe

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


# --- reading files someone else may have written --------------------------------------------------

_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


def open_input(path: str | Path, max_bytes: int, what: str, *, hint: str = "", links: bool = True) -> int:
    """A descriptor of ``path`` opened for reading once it is known to be a regular file of at
    most ``max_bytes`` bytes (``fstat`` on the open file, so the file checked is the file read).
    A FIFO is refused without blocking, a device (``/dev/zero``) without a byte read; with
    ``links=False`` a symbolic link is refused too. The caller closes the descriptor.

    Raises:
        DataError: ``path`` is missing, not a regular file, a link (``links=False``), or larger
            than ``max_bytes`` (``hint`` says how to raise the bound).
    """
    path = Path(path)
    try:
        fd = os.open(path, _READ_FLAGS | (0 if links else os.O_NOFOLLOW))
    except FileNotFoundError:
        raise DataError(f"{path}: cannot read {what}: not found") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise DataError(
                f"{path}: a symbolic link, where {what} is a regular file; remove the link"
            ) from None
        raise DataError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DataError(f"{path}: not a regular file ({what} is a regular file); remove it")
        if info.st_size > max_bytes:
            raise DataError(
                f"{path}: {info.st_size:,} bytes, more than the {max_bytes:,} {what} may hold"
                + (f" ({hint})" if hint else "")
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_input(path: str | Path, max_bytes: int, what: str, *, hint: str = "", links: bool = True) -> bytes:
    """The bytes of ``path``, checked as :func:`open_input` says, never more than ``max_bytes``
    read (a file that grows while read is refused)."""
    fd = open_input(path, max_bytes, what, hint=hint, links=links)
    try:
        chunks, total = [], 0
        while chunk := os.read(fd, min(1 << 20, max_bytes + 1 - total) or 1):
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise DataError(f"{path}: grew past {max_bytes:,} bytes while read ({what})")
        return b"".join(chunks)
    except OSError as exc:
        raise DataError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


# --- text other programs read: spreadsheets ---------------------------------------------------------

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""Leading characters that make a spreadsheet read a cell as a formula (CSV injection)."""


def made_parents(folder: Path, name: str) -> Path:
    """``folder/name`` (``name`` a plain relative name, ``/``-separated, checked by
    :func:`plain_relative`) with the folders of ``name`` made below ``folder``, through no link: a
    link or a file where one of them goes is refused in one line."""
    target = folder
    parts = plain_relative(name, f"{folder}: a name in the output")
    for part in parts[:-1]:
        target = target / part
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            raise DataError(f"{target}: not a folder (a link or a file) in the output; remove it")
        target.mkdir(exist_ok=True)
    return target / parts[-1]


NAME_BYTES = 255
"""The longest file or folder name (in UTF-8 bytes) most file systems take."""


def plain_part(name: str, what: str) -> str:
    """``name`` when it can be one file or folder name inside an output folder (a ``DatasetDict``'s
    split, a part of a written path): not empty, ``.`` or ``..``; no ``/``, ``\\``, NUL or other
    control character; at most :data:`NAME_BYTES` bytes. Anything else is a one-line
    :class:`DataError` naming ``what``: a name such as ``../../x`` would be written outside.

    >>> plain_part("train", "split")
    'train'
    """
    bad = (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or any(ch in name for ch in "/\\")
        or not name.isprintable()
        or len(name.encode("utf-8", "surrogatepass")) > NAME_BYTES
    )
    if bad:
        raise DataError(
            f"{what} {shown(name)!r}: not a plain name (no '/', '\\', '..', control character; at "
            f"most {NAME_BYTES} bytes); it names a place outside its folder"
        )
    return name


def plain_relative(name: str, what: str) -> tuple[str, ...]:
    """The parts of the ``/``-separated relative name ``name``, each a :func:`plain_part`: an
    absolute name, an empty, ``.`` or ``..`` part are refused (the path stays inside its folder)."""
    if not isinstance(name, str) or not name or name.startswith("/"):
        raise DataError(f"{what} {shown(name)!r}: not a relative name inside the folder")
    return tuple(plain_part(part, what) for part in name.split("/"))


# --- text printed on a terminal -----------------------------------------------------------------------

SHOWN_CHARS = 200
"""The characters of one value (a pair id, a name, a caption) a printed line shows; a longer one
is cut with "…"."""
SHOWN_ITEMS = 10
"""The values of a list a printed line shows (the rest counted)."""


def shown(value: object, chars: int = SHOWN_CHARS) -> str:
    r"""``value`` as text for a printed line: terminal-safe (control characters, line separators and
    bidirectional controls written as escapes, as error lines are: :func:`mispair.errors.terminal_safe`)
    and cut to ``chars`` characters with "…". Only the first ``chars`` characters are looked at,
    so a value of 80 million characters costs no more than a short one.

    >>> shown("ann[2J‮"), shown("x" * 300, 5)
    ('ann\\x1b[2J\\u202e', 'xxxxx…')
    """
    text = value if isinstance(value, str) else str(value)
    safe = terminal_safe(text[: chars + 1])
    return safe if len(safe) <= chars else safe[:chars] + "…"


def listed(values: Sequence[object], items: int = SHOWN_ITEMS, chars: int = SHOWN_CHARS) -> str:
    """The first ``items`` of ``values``, each :func:`shown`, joined by commas, and how many more.

    >>> listed(["a", "b", "c"], items=2)
    'a, b and 1 more'
    """
    head = ", ".join(shown(v, chars) for v in values[:items])
    return head + (f" and {len(values) - items:,} more" if len(values) > items else "")


def spreadsheet_safe(value: object) -> object:
    """``value`` with a leading ``'`` when it is text a spreadsheet would run as a formula
    (captions and ids are untrusted text); anything else unchanged.

    >>> spreadsheet_safe("=HYPERLINK(\\"http://x\\")"), spreadsheet_safe("a dog")
    ('\\'=HYPERLINK("http://x")', 'a dog')
    """
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def spreadsheet_text(value: str) -> str:
    """The text :func:`spreadsheet_safe` made safe, as it was (a cell read back from a CSV
    mispair or its report wrote: ``'=1`` is ``=1`` again; ``'a`` stays ``'a``)."""
    return (
        value[1:] if value.startswith("'") and value[1:2] and value[1:].startswith(FORMULA_STARTS) else value
    )


def _spreadsheet_safe_column(column: Any) -> Any:  # a pandas Series
    """:func:`spreadsheet_safe` of every cell of the pandas Series ``column``: the cells a
    spreadsheet would run found at once, only those rewritten (a call per cell of a million-row
    column took a second)."""
    try:  # a non-text cell (a number among texts) reads NaN here: never risky
        risky = column.str.startswith(FORMULA_STARTS).fillna(False).astype(bool)
    except AttributeError:  # no text at all in an object column: cell by cell
        return column.map(spreadsheet_safe)
    if not risky.any():
        return column
    safe = column.copy()
    safe[risky] = "'" + column[risky].astype(str)
    return safe


CSV_ROWS = 100_000
"""The rows :func:`write_csv` converts at a time (a million pairs' table is 400 MB of text)."""


def write_csv(frame: object, handle: object, *, line_end: str = "\r\n") -> None:
    """Write the pandas DataFrame ``frame`` (no index) as UTF-8 CSV to the binary ``handle``,
    every text cell and column name spreadsheet-safe, :data:`CSV_ROWS` rows at a time: the one
    writer of the CSV files a person opens (``pairs.csv``, ``refused.csv``, ``keep.csv``,
    ``removed.csv``, ``--export-pairs``)."""
    import csv
    import io

    # a CR or LF inside a cell is quoted only when the line end holds it: else quote every text
    quoting = csv.QUOTE_MINIMAL if {"\r", "\n"} <= set(line_end) else csv.QUOTE_NONNUMERIC
    text = io.TextIOWrapper(handle, encoding="utf-8", newline="")  # type: ignore[arg-type]
    columns = [spreadsheet_safe(str(c)) for c in frame.columns]  # type: ignore[attr-defined]
    for start in range(0, max(len(frame), 1), CSV_ROWS):  # type: ignore[arg-type]
        safe = frame.iloc[start : start + CSV_ROWS].copy()  # type: ignore[attr-defined]
        for column in safe.columns:
            if safe[column].dtype == object or str(safe[column].dtype).startswith(("string", "str")):
                safe[column] = _spreadsheet_safe_column(safe[column])
        safe.to_csv(
            text,
            index=False,
            header=columns if start == 0 else False,
            lineterminator=line_end,
            quoting=quoting,
        )
    text.flush()
    text.detach()  # the handle stays open for its owner

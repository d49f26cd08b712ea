"""One bound on the length of every caption, in every reader, and line reading that holds to it.

Every reader cuts a caption longer than ``MAX_TEXT_CHARS`` characters (default 1000) with one
warning naming the file and the count; a text file is read line by line, so a 20 MB line costs at
most the bound in memory, never the whole line.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

from mispair.errors import DataError
from mispair.limits import limit, raise_hint

CHUNK_CHARS = 1 << 20


def cut_long_texts(texts: Sequence[str], where: object) -> list[str]:
    """``texts`` with each one cut to ``MAX_TEXT_CHARS`` characters; one warning names the count."""
    bound = limit("MAX_TEXT_CHARS")
    warn_cut(sum(len(text) > bound for text in texts), where)
    return [text[:bound] for text in texts]


def warn_cut(count: int, where: object) -> None:
    """Warn that ``count`` captions of ``where`` were cut (nothing when ``count`` is 0)."""
    if count:
        bound = limit("MAX_TEXT_CHARS")
        warnings.warn(
            f"{where}: {count} caption(s) longer than {bound} characters were cut "
            f"({raise_hint('MAX_TEXT_CHARS')})",
            stacklevel=3,
        )


def read_lines(path: Path, max_chars: int) -> tuple[list[str], int]:
    """The lines of the UTF-8 file ``path`` (split at ``\\n`` only, ``\\r`` stripped), each cut to
    ``max_chars`` characters, and how many were cut. No more than ``max_chars`` plus one chunk of
    a line is ever held in memory.

    Raises:
        DataError: the file cannot be read or is not UTF-8 (the message names it).
    """
    lines, cut = [], 0
    try:
        with open(path, encoding="utf-8", newline="\n") as handle:
            while line := handle.readline(max_chars + 1):
                if len(line) > max_chars and not line.endswith("\n"):
                    _skip_rest_of_line(handle)
                text = line.removesuffix("\n").rstrip("\r")
                cut += len(text) > max_chars
                lines.append(text[:max_chars])
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return lines, cut


def _skip_rest_of_line(handle) -> None:
    while chunk := handle.readline(CHUNK_CHARS):
        if chunk.endswith("\n"):
            return

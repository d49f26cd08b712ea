"""User-facing errors: the CLI prints these as one line, never as a traceback."""

from __future__ import annotations

import unicodedata

_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class MispairError(Exception):
    r"""A mistake in user input (a file, a config value, an argument).

    The message names the offending file or option and the problem; the CLI prints it as
    ``mispair: error: <message>`` and exits with status 2. Its text is safe to print on a
    terminal: control characters (an escape sequence in a file name or a caption), line
    separators and bidirectional controls are written as escapes, so it stays one line, and it
    is cut at :data:`MESSAGE_CHARS` characters with "…" (a message quoting a 10 MB value from a
    file stays a line a person reads).

    >>> print(DataError("bad\x1b[2J name\n"))
    bad\x1b[2J name\n
    """

    def __str__(self) -> str:
        return shortened(terminal_safe(super().__str__()))


MESSAGE_CHARS = 2000
"""The most characters an error's message prints (the backstop under every message's own bounds)."""


def shortened(text: str, most: int = MESSAGE_CHARS) -> str:
    """``text`` cut to ``most`` characters, the cut marked with "…" and the characters left out."""
    if len(text) <= most:
        return text
    return f"{text[: most - 40]}… ({len(text) - most + 40:,} more characters)"


def terminal_safe(text: str) -> str:
    r"""``text`` with every control character (C0, DEL, C1), line or paragraph separator and
    bidirectional control written as its escape (``\x1b``); anything else kept."""
    if text.isprintable():
        return text
    return "".join(
        ch.encode("unicode_escape").decode("ascii")
        if ch in _BIDI or unicodedata.category(ch) in ("Cc", "Zl", "Zp")
        else ch
        for ch in text
    )


class DataError(MispairError):
    """A data file is missing, malformed or inconsistent."""


class ConfigError(MispairError):
    """A configuration value or command-line override is invalid."""


class DivergedError(MispairError):
    """Training or evaluation met non-finite numbers: a model whose weights diverged."""

"""Text from a collection made safe to print on a terminal.

A caption is data written by someone else: an escape sequence in it (``ESC [ 2 J``, an OSC
hyperlink, a title change) would act on the terminal it is printed to, and a newline or a
bidirectional override would disguise the table it is printed in. :func:`printable` writes each
such character as a visible Python escape instead, and :func:`json_text` writes JSON in which
each is a ``\\u`` escape (the same JSON: it reads back to the same text).

>>> printable("red \\x1b[31mapple\\x1b[0m\\n")
'red \\\\x1b[31mapple\\\\x1b[0m\\\\n'
>>> printable("café 🍎")
'café 🍎'
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Bidirectional marks, embeddings, overrides and isolates: they reorder what follows them."""
_UNSAFE_IN_JSON = re.compile(f"[\x7f-\x9f\u2028\u2029{''.join(sorted(_BIDI))}]")
"""What :func:`json.dumps` leaves raw and a terminal may act on (it escapes C0 itself)."""


def printable(text: str) -> str:
    """``text`` with every control character (C0, DEL, C1: Unicode category ``Cc``), line or
    paragraph separator and bidirectional control written as its escape (``\\x1b``, ``\\n``,
    ``\\u202e``); other characters, accents and emoji included, are kept."""
    if text.isprintable():  # the usual case: nothing to escape
        return text
    return "".join(_escaped(ch) for ch in text)


def _escaped(ch: str) -> str:
    if ch in _BIDI or unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
        return ch.encode("unicode_escape").decode("ascii")
    return ch


def json_text(value: Any, indent: int | None = None) -> str:
    """``value`` as JSON, non-ASCII text kept, with every character :func:`printable` escapes
    written as a ``\\uXXXX`` escape (outside strings JSON is ASCII, so only strings change)."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)

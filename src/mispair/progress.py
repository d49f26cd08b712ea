"""Progress bars and progress lines: every bar of mispair is made here and the commands log through
:func:`log_line`, so ``--quiet`` switches them all off (notes, warnings and results still print)."""

from __future__ import annotations

import sys
from typing import Any

from tqdm.auto import tqdm

_quiet = False


def set_quiet(quiet: bool) -> None:
    """Switch every progress bar of this process off (``--quiet``) or back on."""
    global _quiet
    _quiet = quiet


def is_quiet() -> bool:
    """Whether progress bars are switched off."""
    return _quiet


def progress_bar(iterable: Any = None, *, disable: bool = False, **options: Any) -> tqdm:
    """A ``tqdm`` bar over ``iterable`` (``options`` as tqdm's), shown unless ``disable`` or quiet."""
    return tqdm(iterable, disable=disable or _quiet, **options)


QUIET_HELP = "no progress bars or progress lines (notes, warnings and results still print)"
"""``--quiet``'s help."""


class ProgressLine(str):
    """A log line that says how far the work is (an epoch, a stage), not what the person must
    know: ``--quiet`` hides it (:func:`log_line`). It is a ``str``, so any ``log`` callback takes it."""


def log_line(message: str) -> None:
    """Print a command's log ``message`` to standard error, unless quiet and it is a
    :class:`ProgressLine` (notes, warnings and results always print)."""
    if not (_quiet and isinstance(message, ProgressLine)):
        print(message, file=sys.stderr)

"""Progress bars: every bar of mispair is made here, so ``--quiet`` switches them all off."""

from __future__ import annotations

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

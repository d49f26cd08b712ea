"""Real image–caption datasets installed on the machine, prepared in the precomputed format.

``PREPARERS[name](out=..., ...)`` builds one; see :mod:`.tuxpaint` and :mod:`.openclipart`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mispair.data.precomp import read_natural_noise
from mispair.data.sources.openclipart import prepare_openclipart
from mispair.data.sources.tuxpaint import prepare_tuxpaint

PREPARERS: dict[str, Callable[..., Path]] = {"tuxpaint": prepare_tuxpaint, "openclipart": prepare_openclipart}

__all__ = ["PREPARERS", "prepare_openclipart", "prepare_tuxpaint", "read_natural_noise"]

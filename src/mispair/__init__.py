"""mispair: image–text retrieval that stays accurate when training pairs are mismatched.

``mispair.audit(source, ...)`` ranks every pair of a collection by how likely it is mismatched
(a path in any form the readers take, or a pandas DataFrame) and returns an ``AuditResult``;
``mispair.train(source, ...)`` trains a retriever on it and returns a ``TrainedModel``.
"""

import importlib
from typing import TYPE_CHECKING, Any

from mispair import audit
from mispair.errors import MispairError

if TYPE_CHECKING:
    from mispair.api import train
    from mispair.data.noise import NoiseRecord, inject_noise
    from mispair.data.pairset import PairSet
    from mispair.data.precomp import read_precomp, write_precomp
    from mispair.data.synthetic import make_synthetic
    from mispair.engine.metrics import retrieval_metrics

__all__ = [
    "MispairError",
    "NoiseRecord",
    "PairSet",
    "audit",
    "inject_noise",
    "make_synthetic",
    "read_precomp",
    "retrieval_metrics",
    "train",
    "write_precomp",
]
from mispair.version import __version__ as __version__  # re-exported

_LAZY = {
    "NoiseRecord": "mispair.data.noise",
    "inject_noise": "mispair.data.noise",
    "PairSet": "mispair.data.pairset",
    "read_precomp": "mispair.data.precomp",
    "write_precomp": "mispair.data.precomp",
    "make_synthetic": "mispair.data.synthetic",
    "retrieval_metrics": "mispair.engine.metrics",
    "train": "mispair.api",
}
"""Where each public name lives: imported on first use, so that ``import mispair`` (and the
command line, which imports it first) loads neither torch nor numpy."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # found directly from now on
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})

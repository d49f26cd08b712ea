"""mispair: image–text retrieval that stays accurate when training pairs are mismatched.

``mispair.audit(source, ...)`` ranks every pair of a collection by how likely it is mismatched
(a path in any form the readers take, or a pandas DataFrame) and returns an ``AuditResult``;
``mispair.train(source, ...)`` trains a retriever on it and returns a ``TrainedModel``.
"""

from typing import Any

from mispair import audit
from mispair.data.noise import NoiseRecord, inject_noise
from mispair.data.pairset import PairSet
from mispair.data.precomp import read_precomp, write_precomp
from mispair.data.synthetic import make_synthetic
from mispair.engine.metrics import retrieval_metrics
from mispair.errors import MispairError

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


def __getattr__(name: str) -> Any:  # the engine is imported on first use
    if name == "train":
        from mispair.api import train

        return train
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

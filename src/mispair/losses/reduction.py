"""How a recipe turns per-sample losses into the scalar it trains on."""

from __future__ import annotations

from typing import Literal

from torch import Tensor

Reduction = Literal["mean", "sum"]


def reduce_batch(per_sample: Tensor, reduction: Reduction) -> Tensor:
    """``[B]`` per-sample losses → a scalar: their ``mean`` or ``sum`` over the batch.

    The papers differ (NCR, VSE++ and OMIT Eq. 6 sum over the batch; InfoNCE-style losses and
    several reference codes average); each recipe states its choice as an option.
    """
    return per_sample.sum() if reduction == "sum" else per_sample.mean()

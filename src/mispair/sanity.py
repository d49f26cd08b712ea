"""A degenerate model never scores: weights, scores and input features are checked finite and sane.

A checkpoint with a NaN, an infinite or an absurdly large weight (beyond ``MAX_WEIGHT_ABS``) is
refused when it is loaded, and the scores or vectors a command is about to write are checked
finite first, so no result of a diverged model is ever written (it would audit with AUC 0.5 and
exit status 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from mispair.errors import DivergedError
from mispair.limits import limit, raise_hint

if TYPE_CHECKING:  # torch is imported where a tensor is checked: search vectors need numpy only
    import torch


def check_weights(weights: Mapping[str, Any], where: object) -> None:
    """Every floating-point tensor of the state dict ``weights`` finite and at most
    ``MAX_WEIGHT_ABS`` in absolute value; a :class:`DivergedError` naming ``where`` and the
    first tensor that is not."""
    import torch

    bound = limit("MAX_WEIGHT_ABS")
    for name, tensor in weights.items():
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point() or not tensor.numel():
            continue
        if not bool(torch.isfinite(tensor).all()):
            raise DivergedError(
                f"{where}: weight {name} holds NaN or infinite values (a diverged run); "
                "retrain it, e.g. with a lower train.lr"
            )
        largest = float(tensor.abs().max())
        if largest > bound:
            hint = raise_hint("MAX_WEIGHT_ABS")
            raise DivergedError(
                f"{where}: weight {name} reaches {largest:.3g}, beyond {bound:,} (a diverged "
                f"or tampered run; retrain it, or {hint})"
            )


FEATURE_ABS_BOUND = 1e15
"""The largest feature value read: squared and summed over a few thousand dimensions it stays far
below float32's 3.4e38, where a larger one overflows a norm to infinity (a ranking of zeros)."""


def feature_problem(block: np.ndarray) -> str | None:
    """Why the input features ``block`` cannot be scored (NaN or infinite values, or values beyond
    :data:`FEATURE_ABS_BOUND`, finite in float64 but infinite once in float32 or once squared),
    or None when they can."""
    if not np.isfinite(block).all():
        return "NaN or infinite values"
    if block.size and float(np.abs(block).max()) > FEATURE_ABS_BOUND:
        return (
            f"features beyond ±{FEATURE_ABS_BOUND:.0e} (largest {float(np.abs(block).max()):.3g}), which "
            "overflow to infinity in float32 arithmetic; scale the features down"
        )
    return None


def check_finite(values: np.ndarray | torch.Tensor, what: str, where: object) -> None:
    """All of ``values`` finite, else a :class:`DivergedError` naming ``what`` and ``where``."""
    array = values.detach().cpu().numpy() if hasattr(values, "detach") else np.asarray(values)
    bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
    if bad:
        raise DivergedError(
            f"{where}: {bad} of {np.size(array)} {what} are NaN or infinite (the model is "
            "degenerate); nothing was written: retrain the model"
        )

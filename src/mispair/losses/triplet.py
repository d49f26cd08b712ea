"""Hinge triplet ranking loss (VSE / VSE++ / NCR), per sample."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

Negatives = Literal["sum", "hardest", "mean"]


def hinge_costs(sims: Tensor, margin: float | Tensor = 0.2) -> tuple[Tensor, Tensor]:
    """The two hinge matrices of a batch: ``[α_i − S_ii + S_ij]_+`` (image ``i`` against caption
    ``j``) and ``[α_i − S_ii + S_ji]_+`` (caption ``i`` against image ``j``), 0 on the diagonal.

    Args:
        sims: ``[B, B]`` similarities, positives on the diagonal.
        margin: a scalar, or ``[B]`` per-sample margins ``α_i`` (NCR's soft margins).

    Returns:
        ``(i2t, t2i)``, both ``[B, B]`` with row ``i`` holding anchor ``i``'s costs.
    """
    n = sims.shape[0]
    margin = torch.as_tensor(margin, dtype=sims.dtype, device=sims.device)
    margin = margin.expand(n) if margin.dim() == 0 else margin
    threshold = margin[:, None] - sims.diagonal()[:, None]
    eye = torch.eye(n, dtype=torch.bool, device=sims.device)
    i2t = (threshold + sims).clamp(min=0).masked_fill(eye, 0)
    t2i = (threshold + sims.t()).clamp(min=0).masked_fill(eye, 0)
    return i2t, t2i


def triplet_loss(sims: Tensor, margin: float | Tensor = 0.2, *, negatives: Negatives = "sum") -> Tensor:
    """Bidirectional hinge triplet loss of each positive pair, L2RM Eq. 2 / NCR Eq. 9.

    For pair ``i`` (image i, caption i) with margin ``α_i``::

        ℓ_i = Σ_j [α_i − S_ii + S_ij]_+  +  Σ_j [α_i − S_ii + S_ji]_+      (j ≠ i)

    ``negatives``: ``sum`` (as written), ``hardest`` (VSE++: the maximum over ``j`` in each
    direction) or ``mean`` (NCR's division loss, its ``eval_loss``: the costs averaged over the
    ``B`` columns/rows, the positive counting 0).

    Args:
        sims: ``[B, B]`` similarities, ``sims[i, j]`` of image i and caption j, positives on the
            diagonal, higher = more similar.
        margin: a scalar, or ``[B]`` per-sample margins (NCR's soft margins).
        negatives: how each anchor's hinge costs are combined.

    Returns:
        ``[B]`` per-sample losses (0 for a batch of one: no negatives).
    """
    if sims.shape[0] == 1:
        return sims.new_zeros(1) + 0 * sims.sum()
    i2t, t2i = hinge_costs(sims, margin)
    if negatives == "hardest":
        return i2t.amax(dim=1) + t2i.amax(dim=1)
    if negatives == "mean":
        return i2t.mean(dim=1) + t2i.mean(dim=1)
    return i2t.sum(dim=1) + t2i.sum(dim=1)


def mean_hinge_loss(sims: Tensor, margin: float = 0.2) -> Tensor:
    """NCR's division loss: :func:`triplet_loss` with ``negatives="mean"``. ``[B, B]`` → ``[B]``."""
    return triplet_loss(sims, margin, negatives="mean")

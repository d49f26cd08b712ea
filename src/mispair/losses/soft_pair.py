"""The loss of a recipe's positive pairs, each trusted to a degree: a soft-margin triplet or a
weighted InfoNCE, so that a recipe's robustness signal survives a change of loss."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from mispair.losses.info_nce import info_nce_loss
from mispair.losses.triplet import triplet_loss

PairLoss = Literal["triplet", "infonce"]


def soft_pair_loss(
    sims: Tensor,
    margins: float | Tensor,
    *,
    loss: PairLoss = "triplet",
    margin: float = 0.2,
    tau: float = 0.2,
) -> Tensor:
    """Per-pair loss with pair ``i`` trusted to the degree ``α_i / α`` of its margin.

    ``loss="triplet"``: the hardest-negative triplet loss with margins ``α_i`` (NCR Eq. 9, PC²
    Eq. 9, ASL's triplet ablation with ``α' = σα``, L2RM Eq. 2 with ``α_i = α``). ``loss="infonce"``:
    the cross-modal InfoNCE of pair ``i`` (:func:`info_nce_loss`, temperature τ) weighted by the
    same fraction of the full margin::

        ℓ_i = (α_i / α) · [H(y_i, softmax_j(S_ij / τ)) + H(y_i, softmax_j(S_ji / τ))]

    as ``holdout`` weights its trusted pairs by their clean probability: a pair the recipe fully
    trusts (``α_i = α``) gets the plain InfoNCE, a pair it gives no margin gets no pull.

    Args:
        sims: ``[B, B]`` similarities, positives on the diagonal.
        margins: ``[B]`` per-pair margins ``α_i`` in ``[0, α]``, or a scalar.
        loss: ``triplet`` or ``infonce``.
        margin: the full margin α.
        tau: InfoNCE's temperature τ.

    Returns:
        ``[B]`` per-sample losses.
    """
    if loss == "triplet":
        return triplet_loss(sims, margins, negatives="hardest")
    weights = torch.as_tensor(margins, dtype=sims.dtype, device=sims.device) / margin
    return weights * info_nce_loss(sims, tau)

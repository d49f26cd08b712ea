"""PC²'s losses: pseudo-classification (Eq. 2), its balance term (Eq. 3) and the pseudo-pairs'
triplet loss (Eq. 6)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from mispair.losses.triplet import triplet_loss


def pseudo_classification_loss(image_logits: Tensor, text_logits: Tensor) -> Tensor:
    """PC² Eq. 2 per pair: ``H(q̂_i, p_i)``, the cross-entropy of the image's prediction ``p_i =
    softmax(C(f(I_i)))`` with the hard pseudo-label ``q̂_i = argmax C(g(T_i))`` of its caption.

    ``image_logits``, ``text_logits`` ``[B, K]`` → ``[B]`` (no gradient reaches the text side:
    the label is an argmax).
    """
    return F.cross_entropy(image_logits, text_logits.argmax(dim=1), reduction="none")


def balance_loss(probs: Tensor, mode: str = "mean") -> Tensor:
    """PC² Eq. 3, the term spreading predictions ``probs [B, K]`` over the classes (scalar).

    ``mode="mean"`` (the paper): ``Σ_k p̄_k log p̄_k`` with ``p̄ = (1/B) Σ_i p_i``, the negative
    entropy of the batch's mean prediction; minimising it spreads the batch over all classes
    while each prediction may stay confident. ``mode="sample"`` (the reference code):
    ``(1/B) Σ_i Σ_k p_ik log p_ik``, minus the mean entropy of each prediction, which pushes every
    single prediction towards uniform.
    """
    if mode == "sample":
        return (probs * probs.clamp(min=1e-8).log()).sum(dim=1).mean()
    mean = probs.mean(dim=0)
    return (mean * mean.clamp(min=1e-8).log()).sum()


def pseudo_pair_loss(sims: Tensor, lender: Tensor, margins: Tensor) -> Tensor:
    """PC² Eq. 6 per noisy image: the hardest-negative triplet loss of ``(I_i^n, T_i^p)``.

    ``sims [B, B]`` scores noisy image ``i`` against pseudo-caption ``k`` (the caption of clean
    pair ``lender[k]``); when two noisy images borrow the same caption, that caption is not a
    negative of either (it would be its own positive). ``margins [B]`` from Eq. 5 → ``[B]``.
    """
    same = lender[:, None] == lender[None, :]
    same.fill_diagonal_(False)
    return triplet_loss(sims.masked_fill(same, float("-inf")), margins, negatives="hardest")

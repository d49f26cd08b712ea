"""Soft correspondence targets of the co-training recipes and the margins they set, per sample."""

from __future__ import annotations

from torch import Tensor

from mispair.losses.triplet import triplet_loss


def correspondence_prediction(sims: Tensor, margin: float = 0.2) -> Tensor:
    """NCR's predicted correspondence of each pair of a batch (its ``predict`` mode).

    ``p_i = clamp(α − (mean_j h^{i2t}_{ij} + mean_j h^{t2i}_{ij}) / 2, 0, α)`` from the hinge
    costs ``h`` of pair ``i``, divided by the mean of the top ``B // 10 + 1`` values so that the
    most confident pairs sit near 1, and clamped to ``[0, 1]`` as NCR's reference does: when no
    pair of the batch is free of violations the top values differ, the ratio exceeds 1 for the
    best pairs, and an unclamped target would give a soft margin above α (NCR Eq. 9).
    ``sims [B, B]`` → ``[B]`` in ``[0, 1]``.
    """
    p = (margin - triplet_loss(sims, margin, negatives="mean") / 2).clamp(min=0, max=margin)
    top = p.sort().values[-(sims.shape[0] // 10 + 1) :]
    return (p / top.mean().clamp(min=1e-12)).clamp(0, 1)


def soft_margin(targets: Tensor, margin: float, curve: float = 10.0) -> Tensor:
    """NCR's exponential soft margin ``α · (m^ŷ − 1) / (m − 1)`` (NCR Eq. 9, m = ``curve``)."""
    return margin * (curve**targets - 1) / (curve - 1)


def rectified_target(clean_prob: Tensor, oscillation_prob: Tensor, threshold: float = 0.5) -> Tensor:
    """The exponent of PC² Eq. 8: ``w^c + (1 − w^c) · 1(w^o > τ) · w^o``.

    ``clean_prob`` ``w^c`` (co-divide on losses) and ``oscillation_prob`` ``w^o`` (co-divide on
    the prediction oscillation, Eq. 7) ``[B]``; a pair the loss split doubts but whose prediction
    is stable gets part of its margin back. ``α^c = α (m^target − 1) / (m − 1)``.
    """
    stable = (oscillation_prob > threshold).to(clean_prob.dtype)
    return clean_prob + (1 - clean_prob) * stable * oscillation_prob

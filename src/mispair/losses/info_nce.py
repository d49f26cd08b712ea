"""Cross-modal InfoNCE, per sample."""

from __future__ import annotations

import torch
from torch import Tensor


def info_nce_loss(sims: Tensor, tau: float = 0.05) -> Tensor:
    """Cross-modal InfoNCE of each positive pair, L2RM Eq. 3 / RCL Eq. 8.

    ``ℓ_i = H(y_i, p_i^{v2t}) + H(y_i, p_i^{t2v})`` with ``p^{v2t}_{ij} = softmax_j(S_ij / τ)``
    and ``p^{t2v}_{ij} = softmax_j(S_ji / τ)``: the image→text and text→image cross-entropies of
    the diagonal target.

    Args:
        sims: ``[B, B]`` similarities, positives on the diagonal (or ``[..., B, B]``: one batch's
            similarities under several models, each scored alone).
        tau: temperature τ.

    Returns:
        ``[B]`` per-sample losses (``[..., B]``).
    """
    i2t, t2i = _directions(sims, tau)
    return i2t + t2i


def generalized_info_nce_loss(sims: Tensor, tau: float = 0.05, q: float = 0.5) -> Tensor:
    """InfoNCE with each direction's cross-entropy replaced by the generalized cross-entropy
    ``L_q(p) = (1 − p^q) / q`` of its positive's probability (Zhang & Sabuncu, NeurIPS 2018,
    Eq. 6): ``ℓ_i = L_q(p_ii^{v2t}) + L_q(p_ii^{t2v})``. Its gradient is InfoNCE's times
    ``p^q``, so a pair the model finds unlikely (a mismatched pair that was trusted) pulls less;
    ``q → 0`` gives :func:`info_nce_loss`, ``q = 1`` the bounded ``1 − p``.

    Args:
        sims: ``[..., B, B]`` similarities, positives on the diagonal.
        tau: temperature τ.
        q: the exponent, in ``(0, 1]``.

    Returns:
        ``[..., B]`` per-sample losses.
    """
    i2t, t2i = _directions(sims, tau)
    return -(torch.expm1(-q * i2t) + torch.expm1(-q * t2i)) / q


def _directions(sims: Tensor, tau: float) -> tuple[Tensor, Tensor]:
    """The image→text and text→image cross-entropies ``[..., B]`` of the diagonal target."""
    logits = sims / tau
    i2t = -torch.log_softmax(logits, dim=-1).diagonal(dim1=-2, dim2=-1)
    t2i = -torch.log_softmax(logits, dim=-2).diagonal(dim1=-2, dim2=-1)
    return i2t, t2i


def reverse_cross_entropy(sims: Tensor, tau: float = 0.05, eps: float = 1e-7) -> Tensor:
    """Reverse cross-entropy of each pair in both directions, L2RM Eq. 4–5 (warm-up term).

    ``H(p_i, y_i) = −Σ_j p_ij log y_ij`` with the one-hot ``y`` bounded to ``[ε, 1−ε]``; it equals
    ``−log(ε) · (1 − p_ii) − log(1 − ε) · p_ii`` summed over both directions.

    Args:
        sims: ``[B, B]`` similarities, positives on the diagonal.
        tau: temperature τ of the matching probabilities.
        eps: the bound ε of the one-hot target.

    Returns:
        ``[B]`` per-sample losses.
    """
    logits = sims / tau
    log_eps = torch.log(torch.tensor(eps, dtype=sims.dtype, device=sims.device))
    log_one = torch.log1p(torch.tensor(-eps, dtype=sims.dtype, device=sims.device))
    total = sims.new_zeros(sims.shape[0])
    for dim in (1, 0):
        p_pos = torch.softmax(logits, dim=dim).diagonal()
        total = total - log_eps * (1 - p_pos) - log_one * p_pos
    return total

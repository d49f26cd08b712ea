"""Asymmetric dynamic matching loss of ASL, per sample."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def soft_boundary(soft_labels: Tensor, z: float = 3.0) -> Tensor:
    """Soft-boundary factor ``σ = (z^ŷ − 1) / (z − 1)`` of ASL (below Eq. 6; ``α' = σα`` in Eq. 2).

    ``σ`` rises from 0 at ``ŷ = 0`` to 1 at ``ŷ = 1``; ``z → 1`` gives ``σ = ŷ``.

    Args:
        soft_labels: ``[B]`` soft labels ``ŷ`` in ``[0, 1]``.
        z: relaxation factor ``z > 0``.

    Returns:
        ``[B]`` factors σ.
    """
    if z <= 0:
        raise ValueError(f"z must be positive, got {z}")
    if z == 1:
        return soft_labels
    return (torch.pow(z, soft_labels) - 1) / (z - 1)  # exactly 1 at ŷ = 1


def asymmetric_loss(
    sims: Tensor,
    soft_labels: Tensor | None = None,
    *,
    m0: float = 0.2,
    scale: float = 64.0,
    z: float = 3.0,
    detach_weights: bool = False,
) -> Tensor:
    """Bidirectional asymmetric dynamic matching loss of each pair, ASL Eq. 5–6.

    For anchor image ``i`` (positive caption ``i``, negative captions ``j ≠ i``), ASL Eq. 5::

        l(I_i) = log(1 + exp(−λ μ_p (S_ii − m_p)) · Σ_{j≠i} exp(λ μ_n^j (S_ij − m_n)))
        μ_p = [σ_i U_p − S_ii]_+,  μ_n^j = [S_ij − U_n]_+                       (Eq. 6)

    with ``m_p = 1 − m0``, ``m_n = m0``, ``U_p = 1 + m0``, ``U_n = −m0`` and the soft boundary
    ``σ_i = (z^ŷ_i − 1) / (z − 1)``; each anchor has one positive, so Eq. 5's sum over
    positives has one term. The loss of pair ``i`` sums both directions (the unnumbered
    ``L(I_i, T_i)`` of "Robust Training"): ``ℓ_i = l(I_i) + l(T_i)``, where caption ``i`` is
    the anchor against the negative images ``h ≠ i`` (column ``i``). Computed as
    ``softplus(a + logsumexp_j b_j)``, so ``λ = 128`` does not overflow.

    Args:
        sims: ``[B, B]`` similarities, positives on the diagonal, in ``[−1, 1]`` (cosine-like).
        soft_labels: ``[B]`` soft labels ``ŷ`` in ``[0, 1]``; ``None`` means all ones (σ = 1).
        m0: margin ``m0`` (paper: 0.2).
        scale: scale factor λ (paper: 64).
        z: relaxation factor (paper: 3).
        detach_weights: ``False`` (the default) differentiates through ``μ_p`` and ``μ_n``:
            the gradients printed below Eq. 6 in the paper are those of this form (at
            ``S_ii = 0.5``, ``σ = 1``: ``λA(2S − σU_p − m_p) = −λA``). ``True`` treats the
            weights as constants in the backward pass, as circle loss (Sun et al. 2020) does
            (``−λA μ_p = −0.7 λA`` at the same point).

    Returns:
        ``[B]`` per-sample losses (0 for a batch of one: no negatives).
    """
    n = sims.shape[0]
    if n < 2:
        return sims.new_zeros(n) + 0 * sims.sum()
    if soft_labels is None:
        sigma = sims.new_ones(n)
    else:
        sigma = soft_boundary(soft_labels.to(sims.dtype), z)
    args = (sigma, m0, scale, detach_weights)
    return _one_direction(sims, *args) + _one_direction(sims.t(), *args)


def _one_direction(sims: Tensor, sigma: Tensor, m0: float, scale: float, detach_weights: bool) -> Tensor:
    """ASL Eq. 5 for the anchors in the rows of ``sims`` (positives on the diagonal), ``[B]``."""
    weight_sims = sims.detach() if detach_weights else sims
    positives = sims.diagonal()
    eye = torch.eye(sims.shape[0], dtype=torch.bool, device=sims.device)
    mu_p = (sigma * (1 + m0) - weight_sims.diagonal()).clamp(min=0)
    mu_n = (weight_sims + m0).clamp(min=0)
    pos_logit = -scale * mu_p * (positives - (1 - m0))
    neg_logits = (scale * mu_n * (sims - m0)).masked_fill(eye, float("-inf"))
    return F.softplus(pos_logit + neg_logits.logsumexp(dim=1))

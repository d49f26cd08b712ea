"""Complementary contrastive learning (CCL) of RCL, per sample, and the Table 7 ablation losses.

RCL (Hu et al., TPAMI 2023) trains only on negative (complementary) information: every other
item of the batch is "not matched" with an anchor, and the matching probability of each such
negative pair is pushed down through one of five bounded losses (Eq. 14–18).
"""

from __future__ import annotations

import torch
from torch import Tensor

COMPLEMENTARY_KINDS = ("mae", "log", "exp", "gce", "tan")
ABLATION_LOSSES = ("tr", "tr-hn", "cl", "nl")


def matching_probabilities(sims: Tensor, tau: float = 0.05) -> tuple[Tensor, Tensor]:
    """Cross-modal matching probabilities, RCL Eq. 1–2.

    Args:
        sims: ``[B, B]`` similarities, ``sims[i, j]`` of image i and caption j, higher = more
            similar, positives on the diagonal.
        tau: temperature τ.

    Returns:
        ``(p_i2t, p_t2i)``, both ``[B, B]`` with anchor ``k`` in row ``k``:
        ``p_i2t[k, j] = softmax_j(S_kj / τ)`` (image k queries caption j) and
        ``p_t2i[k, j] = softmax_j(S_jk / τ)`` (caption k queries image j).
    """
    return torch.softmax(sims / tau, dim=1), torch.softmax(sims.t() / tau, dim=1)


def complementary_loss(
    sims: Tensor,
    *,
    kind: str = "log",
    tau: float = 0.05,
    q: float = 0.5,
    ratio: float = 1.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Complementary contrastive loss of each pair over its negatives, RCL Eq. 14–18.

    With ``p`` the matching probability (Eq. 1–2) of a negative pair and ``N_k`` the negatives
    of anchor ``k``, the term ``φ(p)`` is one of

    ======  ======================  =========
    kind    φ(p)                    equation
    ======  ======================  =========
    mae     ``p``                   Eq. 14
    log     ``−log(1 − p)``         Eq. 15
    exp     ``exp(−(1 − p))``       Eq. 16
    gce     ``(1 − (1 − p)^q) / q``   Eq. 17
    tan     ``tan(p)``              Eq. 18
    ======  ======================  =========

    and the loss of pair ``k`` **sums** the terms over the negatives and over both directions::

        ℓ_k = Σ_{j∈N_k} φ(p^{i2t}_{kj}) + Σ_{j∈N_k} φ(p^{t2i}_{kj})

    so the mean of ``ℓ`` over the batch is Eq. 14–18 (``1/N Σ_k Σ_{p∈P̄_k}``, with
    ``P̄_k = P̄_k^{v2t} ∪ P̄_k^{t2v}``) and the reference code's ``sum(1).mean()`` of each
    direction, added. ``−log(1 − p)`` and ``(1 − p)^q`` are computed from ``log(1 − p)`` taken as
    a log-sum-exp over the other entries, so they stay finite, with finite gradients, as
    ``p → 1``.

    Args:
        sims: ``[B, B]`` similarities, positives on the diagonal (or ``[..., B, B]``: one batch's
            similarities under several models, each scored alone, sharing the draw of negatives).
        kind: one of :data:`COMPLEMENTARY_KINDS`.
        tau: temperature τ of the matching probabilities.
        q: exponent of ``gce``, in ``(0, 1]``.
        ratio: fraction of negatives used, in ``(0, 1]``. Below 1, each anchor uses
            ``floor(ratio · B)`` negatives drawn uniformly without replacement (the reference's
            ``ratio`` option counts in batch size ``B``, not ``B − 1``); image k and caption k
            share the draw. ``1`` uses all ``B − 1`` negatives (the paper's setting).
        generator: random source of the draw (unused when ``ratio`` is 1).

    Returns:
        ``[B]`` per-sample losses (``[..., B]``; 0 for a batch of one).
    """
    if kind not in COMPLEMENTARY_KINDS:
        raise ValueError(f"kind must be one of {COMPLEMENTARY_KINDS}, got {kind!r}")
    if not 0 < q <= 1:
        raise ValueError(f"q must be in (0, 1], got {q}")
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")
    n = sims.shape[-1]
    count = n - 1 if ratio >= 1 else min(int(ratio * n), n - 1)
    mask = _negative_mask(n, count, generator=generator, device=sims.device)
    return _complementary(sims, mask, kind=kind, tau=tau, q=q)


def negative_learning_loss(
    sims: Tensor, tau: float = 0.05, *, generator: torch.Generator | None = None
) -> Tensor:
    """Negative learning (NL, Kim et al. 2019) with one random negative, RCL Table 7.

    ``ℓ_k = −log(1 − p^{i2t}_{kj}) − log(1 − p^{t2i}_{kj})`` for one negative ``j ≠ k`` drawn
    uniformly per anchor (shared by image k and caption k): Eq. 15 with a single complementary
    label instead of all ``B − 1``.

    Args:
        sims: ``[B, B]`` similarities, positives on the diagonal.
        tau: temperature τ.
        generator: random source of the negatives.

    Returns:
        ``[B]`` per-sample losses (0 for a batch of one).
    """
    n = sims.shape[0]
    mask = _negative_mask(n, min(1, n - 1), generator=generator, device=sims.device)
    return _complementary(sims, mask, kind="log", tau=tau, q=1.0)


def rcl_ablation_loss(
    sims: Tensor,
    name: str,
    *,
    margin: float | Tensor = 0.2,
    tau: float = 0.05,
    generator: torch.Generator | None = None,
) -> Tensor:
    """One of the ablation losses of RCL Table 7, by name, per sample.

    ``tr``: hinge triplet summed over negatives (VSE); ``tr-hn``: hardest negative (VSE++);
    ``cl``: InfoNCE, Eq. 8; ``nl``: :func:`negative_learning_loss`. Names are case-insensitive
    and ``_`` may stand for ``-``.

    Args:
        sims: ``[B, B]`` similarities, positives on the diagonal.
        name: one of :data:`ABLATION_LOSSES`.
        margin: triplet margin (``tr``, ``tr-hn``), scalar or ``[B]``.
        tau: temperature (``cl``, ``nl``).
        generator: random source (``nl``).

    Returns:
        ``[B]`` per-sample losses.
    """
    from mispair.losses.info_nce import info_nce_loss
    from mispair.losses.triplet import triplet_loss

    key = name.lower().replace("_", "-")
    if key == "tr":
        return triplet_loss(sims, margin)
    if key == "tr-hn":
        return triplet_loss(sims, margin, negatives="hardest")
    if key == "cl":
        return info_nce_loss(sims, tau)
    if key == "nl":
        return negative_learning_loss(sims, tau, generator=generator)
    raise ValueError(f"name must be one of {ABLATION_LOSSES}, got {name!r}")


def _complementary(sims: Tensor, mask: Tensor, *, kind: str, tau: float, q: float) -> Tensor:
    """Sum of ``φ(p)`` over the negatives in ``mask`` ``[B, B]``, both directions, of ``sims``
    ``[..., B, B]`` -> ``[..., B]``."""
    if sims.shape[-1] < 2:
        return sims.new_zeros(sims.shape[:-1]) + 0 * sims.sum()
    total = sims.new_zeros(sims.shape[:-1])
    for logits in (sims / tau, sims.transpose(-2, -1) / tau):
        terms = _phi(logits, kind, q)
        total = total + torch.where(mask, terms, torch.zeros_like(terms)).sum(dim=-1)
    return total


def _phi(logits: Tensor, kind: str, q: float) -> Tensor:
    """``φ(p)`` of Eq. 14–18 for ``p = softmax(logits, dim=-1)``, elementwise ``[..., B, B]``."""
    if kind in ("log", "gce"):
        log_rest = _log_one_minus_softmax(logits)
        return -log_rest if kind == "log" else -torch.expm1(q * log_rest) / q
    p = torch.softmax(logits, dim=-1)
    if kind == "mae":
        return p
    if kind == "exp":
        return torch.exp(p - 1)
    return torch.tan(p)


def _log_one_minus_softmax(logits: Tensor) -> Tensor:
    """``log(1 − softmax(logits, dim=-1))`` ``[..., B, B]``, accurate and differentiable as ``p → 1``.

    Only the row maximum can have ``p > 1/2``; there ``1 − p = Σ_{l≠j} p_l`` is a log-sum-exp
    over the other entries (no cancellation). Elsewhere ``log1p(−p)`` is accurate.
    """
    top = logits.argmax(dim=-1, keepdim=True)
    is_top = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, top, True)
    others = logits.masked_fill(is_top, float("-inf")).logsumexp(dim=-1, keepdim=True)
    log_rest_top = others - logits.logsumexp(dim=-1, keepdim=True)
    # clamp: a no-op off the maximum, and keeps the unused branch (and its gradient) finite
    log_rest = torch.log1p(-torch.softmax(logits, dim=-1).clamp(max=0.5))
    return torch.where(is_top, log_rest_top.expand_as(logits), log_rest)


def _negative_mask(
    n: int,
    count: int,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """``[n, n]`` boolean mask with ``count`` random off-diagonal entries per row.

    ``count = n − 1`` selects every off-diagonal entry without drawing random numbers.
    """
    eye = torch.eye(n, dtype=torch.bool, device=device)
    if count >= n - 1:
        return ~eye
    keys = torch.rand(n, n, generator=generator, device=device).masked_fill(eye, -1.0)
    chosen = keys.topk(count, dim=1).indices
    return torch.zeros(n, n, dtype=torch.bool, device=device).scatter_(1, chosen, True)

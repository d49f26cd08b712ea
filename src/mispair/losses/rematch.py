"""L2RM's rematching loss: the model's matching probabilities against a refined alignment."""

from __future__ import annotations

import torch
from torch import Tensor

REMATCH_KINDS = ("sym_kl", "kl", "infonce")


def alignment_targets(plan: Tensor, eps: float = 1e-10) -> tuple[Tensor, Tensor]:
    """Row- and column-normalised refined alignment ``π̃^{v2t}``, ``π̃^{t2v}`` (L2RM Eq. 10).

    The plan is floored at ``eps`` first (as the reference code does), so a masked or
    untransported entry is a tiny, finite target rather than 0.

    Args:
        plan: ``[B, B]`` transport plan ``π̃`` (image ``i``, caption ``j``), non-negative.
        eps: floor of the plan's entries.

    Returns:
        ``(v2t, t2v)``, both ``[B, B]`` with rows summing to 1: ``v2t[i]`` is row ``i`` of the
        plan normalised (image ``i`` over the captions), ``t2v[i]`` column ``i`` (caption ``i``
        over the images).
    """
    floored = plan.clamp(min=eps)
    return floored / floored.sum(1, keepdim=True), floored.t() / floored.t().sum(1, keepdim=True)


def rematch_loss(
    sims: Tensor, plan: Tensor, tau: float = 0.05, *, kind: str = "sym_kl", eps: float = 1e-10
) -> Tensor:
    """Rematching loss of each pair of a mismatched batch, L2RM Eq. 10 (and Table 3 variants).

    With ``p_i^{v2t} = softmax_j(S_ij / τ)``, ``p_i^{t2v} = softmax_j(S_ji / τ)`` and the targets
    of :func:`alignment_targets`, ``kind``:

    - ``sym_kl`` (Eq. 10): ``½[KL(π̃_i^{v2t} ‖ p_i^{v2t}) + KL(p_i^{v2t} ‖ π̃_i^{v2t})]`` plus
      the same for ``t2v``;
    - ``kl``: ``KL(π̃_i^{v2t} ‖ p_i^{v2t}) + KL(π̃_i^{t2v} ‖ p_i^{t2v})``;
    - ``infonce``: the soft cross-entropies ``H(π̃_i^{v2t}, p_i^{v2t}) + H(π̃_i^{t2v}, p_i^{t2v})``.

    The plan is a target: no gradient flows into it.

    Args:
        sims: ``[B, B]`` similarities of the batch, positives on the diagonal.
        plan: ``[B, B]`` refined alignment (e.g. ``sinkhorn(...).plan[0]``).
        tau: temperature τ of the matching probabilities.
        kind: one of :data:`REMATCH_KINDS`.
        eps: floor of the plan (see :func:`alignment_targets`).

    Returns:
        ``[B]`` per-sample losses.

    Example:
        >>> sims = torch.eye(3)
        >>> plan = torch.full((3, 3), 1 / 9)
        >>> rematch_loss(sims, plan, tau=1.0).shape
        torch.Size([3])
    """
    if kind not in REMATCH_KINDS:
        raise ValueError(f"kind must be one of {REMATCH_KINDS}, got {kind!r}")
    targets = alignment_targets(plan.detach().to(sims.dtype), eps)
    log_probs = (torch.log_softmax(sims / tau, dim=1), torch.log_softmax(sims.t() / tau, dim=1))
    total = sims.new_zeros(sims.shape[0])
    for target, log_p in zip(targets, log_probs):
        log_t = target.log()
        if kind == "infonce":
            total = total - (target * log_p).sum(1)
            continue
        forward = (target * (log_t - log_p)).sum(1)  # KL(π̃ ‖ p)
        if kind == "kl":
            total = total + forward
        else:
            reverse = (log_p.exp() * (log_p - log_t)).sum(1)  # KL(p ‖ π̃)
            total = total + 0.5 * (forward + reverse)
    return total

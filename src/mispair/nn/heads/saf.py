"""SAF head: similarity attention filtration (Diao et al., AAAI 2021, §3.3)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mispair.nn.heads import register_head
from mispair.nn.similarity_representation import SimilarityNodeHead, l1norm, l2norm, xavier_init


def caption_batch_norm(values: Tensor, mask: Tensor, norm: nn.BatchNorm1d) -> Tensor:
    """One-channel batch norm with statistics per caption, as the reference's caption loop.

    The reference normalises ``[Bi, 1, N_j]`` per caption ``j``; in training each caption gets
    its own statistics over the images × real nodes and updates the running statistics once, in
    caption order. In evaluation the running statistics are used.

    Args:
        values: ``[Bi, Bt, N]``; mask: ``[Bt, N]`` bool, True for real nodes.
    """
    if not (norm.training or norm.running_mean is None):
        flat = F.batch_norm(
            values.reshape(-1, 1),
            norm.running_mean,
            norm.running_var,
            norm.weight,
            norm.bias,
            False,
            0.0,
            norm.eps,
        )
        return flat.view_as(values)
    weights = mask.to(values.dtype)
    count = weights.sum(dim=1) * values.shape[0]
    mean = (values * weights).sum(dim=(0, 2)) / count
    var = ((values - mean[:, None]).square() * weights).sum(dim=(0, 2)) / count
    if norm.track_running_stats:
        _update_running_stats(norm, mean.detach(), (var * count / (count - 1)).detach())
    normed = (values - mean[:, None]) / torch.sqrt(var[:, None] + norm.eps)
    return normed * norm.weight + norm.bias


@torch.no_grad()
def _update_running_stats(norm: nn.BatchNorm1d, means: Tensor, variances: Tensor) -> None:
    """Apply ``len(means)`` sequential momentum updates at once."""
    momentum = norm.momentum
    decay = (1 - momentum) ** torch.arange(len(means) - 1, -1, -1, dtype=means.dtype)
    keep = (1 - momentum) ** len(means)
    norm.running_mean.mul_(keep).add_(momentum * (decay * means).sum())
    norm.running_var.mul_(keep).add_(momentum * (decay * variances).sum())
    norm.num_batches_tracked.add_(len(means))


class AttentionFiltration(nn.Module):
    """Gate attention over the nodes (SGRAF Eq. 8–9, NCR ``AttentionFiltration``).

    ``α_p = l1norm_p(sigmoid(BN(w · s_p + b)))`` over the real nodes, output
    ``l2norm(Σ_p α_p s_p)``.
    """

    def __init__(self, sim_dim: int) -> None:
        super().__init__()
        self.gate = nn.Linear(sim_dim, 1)
        self.norm = nn.BatchNorm1d(1)
        xavier_init(self.gate)

    def forward(self, nodes: Tensor, mask: Tensor) -> Tensor:
        """``nodes [Bi, Bt, N, S]``, ``mask [Bt, N]`` -> ``[Bi, Bt, S]``."""
        gates = caption_batch_norm(self.gate(nodes).squeeze(-1), mask, self.norm)
        attention = l1norm(torch.sigmoid(gates) * mask.to(nodes.dtype), dim=-1)
        return l2norm((attention[..., None] * nodes).sum(dim=2))


@register_head("saf")
class SAFHead(SimilarityNodeHead):
    """``S_ij = sigmoid(w · f_ij + b)`` with ``f_ij`` the attention-filtered nodes.

    Options: ``sim_dim`` (256), ``num_regions`` (36).
    """

    def __init__(self, embed_dim: int = 1024, sim_dim: int = 256, num_regions: int = 36) -> None:
        super().__init__(embed_dim, sim_dim, num_regions)
        self.filtration = AttentionFiltration(sim_dim)

    def aggregate(self, nodes: Tensor, mask: Tensor) -> Tensor:
        return self.filtration(nodes, mask)

"""SGR head: similarity graph reasoning (Diao et al., AAAI 2021, §3.2; NCR ``GraphReasoning``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mispair.nn.heads import register_head
from mispair.nn.similarity_representation import SimilarityNodeHead, xavier_init


class GraphReasoning(nn.Module):
    """One step over the fully connected graph of the similarity nodes (SGRAF Eq. 6–7).

    ``e_pq = softmax_q((W_q s_p + b_q) · (W_k s_q + b_k))``, ``s'_p = ReLU(W_g Σ_q e_pq s_q)``.
    The key bias only shifts a row of logits, so the logits are computed as ``(s_p W_q^T W_k +
    b_q W_k) · s_q``: one ``sim_dim × sim_dim`` product per node instead of two (same values).
    """

    def __init__(self, sim_dim: int) -> None:
        super().__init__()
        self.query = nn.Linear(sim_dim, sim_dim)
        self.key = nn.Linear(sim_dim, sim_dim)
        self.update = nn.Linear(sim_dim, sim_dim)
        xavier_init(self.query, self.key, self.update)

    def _bilinear(self) -> tuple[Tensor, Tensor]:
        return self.key.weight.t() @ self.query.weight, self.query.bias @ self.key.weight

    def forward(self, nodes: Tensor, key_bias: Tensor) -> Tensor:
        """``nodes [P, N, S]``, ``key_bias [P, 1, N]`` (0 for real nodes, ``-inf`` for padding)
        -> updated nodes ``[P, N, S]``."""
        queries_k = F.linear(nodes, *self._bilinear())
        edges = torch.softmax(torch.baddbmm(key_bias, queries_k, nodes.transpose(-1, -2)), dim=-1)
        return _relu(self.update(torch.bmm(edges, nodes)))

    def global_node(self, nodes: Tensor, key_bias: Tensor) -> Tensor:
        """The updated first (global) node only: ``[P, N, S] -> [P, S]``."""
        bilinear, query_bias = self._bilinear()
        queries_k = F.linear(nodes[:, 0], bilinear, query_bias)  # [P, S]
        logits = torch.baddbmm(key_bias, queries_k.unsqueeze(1), nodes.transpose(1, 2)).squeeze(1)
        edges = torch.softmax(logits, dim=-1)
        return _relu(self.update(torch.bmm(edges.unsqueeze(1), nodes).squeeze(1)))


def _relu(x: Tensor) -> Tensor:
    return torch.relu(x) if torch.is_grad_enabled() else x.relu_()


@register_head("sgr")
class SGRHead(SimilarityNodeHead):
    """``S_ij = sigmoid(w · g_ij + b)`` with ``g_ij`` the global node after ``sgr_step`` steps.

    Options: ``sim_dim`` (256), ``sgr_step`` (3), ``num_regions`` (36).
    """

    def __init__(
        self, embed_dim: int = 1024, sim_dim: int = 256, sgr_step: int = 3, num_regions: int = 36
    ) -> None:
        super().__init__(embed_dim, sim_dim, num_regions)
        self.steps = nn.ModuleList(GraphReasoning(sim_dim) for _ in range(sgr_step))

    def aggregate(self, nodes: Tensor, mask: Tensor) -> Tensor:
        """``nodes [Bi, Bt, N, S]``, ``mask [Bt, N]`` -> reasoned global node ``[Bi, Bt, S]``."""
        n_images, n_texts, n_nodes, sim_dim = nodes.shape
        key_bias = torch.zeros(mask.shape, dtype=nodes.dtype, device=nodes.device)
        key_bias = key_bias.masked_fill(~mask, float("-inf"))[:, None].repeat(n_images, 1, 1)
        nodes = nodes.reshape(n_images * n_texts, n_nodes, sim_dim)
        for step in self.steps[:-1]:
            nodes = step(nodes, key_bias)
        # only the global node is read after the last step
        return self.steps[-1].global_node(nodes, key_bias).view(n_images, n_texts, sim_dim)

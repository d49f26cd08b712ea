"""IN2R's neighbour-built targets for the suspected pairs (Liu et al., "Intra-Modal Neighbors
Never Lie", ICML 2026; public code ``liuyyy111/IN2R``, ``co_train.py``).

A suspected pair is not discarded: it is split, and each half gets a target built from the
trusted pairs nearest to it *within its own modality*. Its image's target caption is made of the
captions of the ``k`` trusted images nearest to that image; its caption's target image of the images
of the ``k`` trusted captions nearest to that caption. The trusted pairs come from a memory of
detached embeddings (:class:`PairMemory`, the code's ``MemoryQueue``) that the *other* model of the
run fills (IN2R's "Cross-Model Memory"); the ``k`` partners are merged into one soft prototype by a
small self-attention block over them (:class:`GraphRefiner`), and the suspected half is trained
against its prototype with InfoNCE over the suspected rows of the batch
(:func:`neighbour_target_loss`): the other rows' prototypes are its negatives.

The paper's text (equation numbers) was not available to us: the equations below are those of
the code, paraphrased (docs/faithfulness.md).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from mispair.losses.info_nce import info_nce_loss, reverse_cross_entropy


def l2_normalize(x: Tensor) -> Tensor:
    """Rows of ``x [..., D]`` scaled to unit length (losses sit beside ``nn``, not above it)."""
    return nn.functional.normalize(x, dim=-1, eps=1e-8)


class PairMemory:
    """A FIFO ring of ``size`` aligned rows ``(image [D], text [D])``: detached, L2-normalised
    embeddings of trusted pairs, the oldest overwritten first (IN2R ``MemoryQueue``; never
    re-encoded, so older rows are stale embeddings of an earlier model)."""

    def __init__(self, size: int, dim: int, device: torch.device | str = "cpu") -> None:
        if size < 1:
            raise ValueError(f"a pair memory holds at least 1 row, got {size}")
        self.images = torch.zeros(size, dim, device=device)
        self.texts = torch.zeros(size, dim, device=device)
        self.next_row, self.filled = 0, 0

    def __len__(self) -> int:
        return self.filled

    @torch.no_grad()
    def add(self, images: Tensor, texts: Tensor) -> None:
        """Write the pairs ``images [n, D]``, ``texts [n, D]`` (normalised and detached here)."""
        size = self.images.shape[0]
        images, texts = l2_normalize(images.detach())[-size:], l2_normalize(texts.detach())[-size:]
        rows = (self.next_row + torch.arange(len(images), device=self.images.device)) % size
        self.images[rows], self.texts[rows] = images.to(self.images.dtype), texts.to(self.texts.dtype)
        self.next_row = (self.next_row + len(images)) % size
        self.filled = min(self.filled + len(images), size)

    def rows(self) -> tuple[Tensor, Tensor]:
        """``(images [n, D], texts [n, D])``: the rows written so far."""
        return self.images[: self.filled], self.texts[: self.filled]

    def state_dict(self) -> dict[str, Tensor | int]:
        return {"images": self.images, "texts": self.texts, "next_row": self.next_row, "filled": self.filled}

    def load_state_dict(self, state: dict) -> None:
        self.images.copy_(state["images"])
        self.texts.copy_(state["texts"])
        self.next_row, self.filled = int(state["next_row"]), int(state["filled"])


def nearest_partners(queries: Tensor, keys: Tensor, partners: Tensor, k: int) -> Tensor:
    """``[B, k, D]``: for each query ``[B, D]``, the partners ``[M, D]`` of its ``k`` most
    cosine-similar keys ``[M, D]`` (same modality as the query; IN2R
    ``retrieve_nearest_text``/``_img``: top-k over the whole memory, no threshold, no temperature;
    no gradient through the search or the memory)."""
    with torch.no_grad():
        nearest = (l2_normalize(queries.detach()) @ keys.t()).topk(min(k, len(keys)), dim=1).indices
    return partners[nearest]


class GraphRefiner(nn.Module):
    """IN2R's Graph Refiner: the ``k`` neighbours' partners ``X [B, k, D]`` → one prototype ``[B, D]``.

    ``X' = LayerNorm(X + Dropout(MHA(X, X, X)))`` (self-attention among the ``k`` nodes, ``heads``
    heads), then ``normalise(mean_k X')``. ``mean``: no attention, the normalised mean of ``X``
    (the code's single-model variant, ``train.py``). Trained only through the loss on the
    suspected pairs.
    """

    def __init__(self, dim: int, heads: int = 4, dropout: float = 0.1, mean: bool = False) -> None:
        super().__init__()
        self.mean = mean
        if not mean:
            self.attention = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
            self.dropout = nn.Dropout(dropout)
            self.norm = nn.LayerNorm(dim)

    def forward(self, nodes: Tensor) -> Tensor:
        if not self.mean:
            attended, _ = self.attention(nodes, nodes, nodes, need_weights=False)
            nodes = self.norm(nodes + self.dropout(attended))
        return l2_normalize(nodes.mean(dim=1))


def neighbour_target_loss(queries: Tensor, targets: Tensor, tau: float = 0.05) -> Tensor:
    """``[B]``: each suspected half ``queries [B, D]`` against its prototype ``targets [B, D]``,
    the others' prototypes as negatives: IN2R's ``infonce`` on ``S = normalise(queries) targetsᵀ``,
    which is symmetric InfoNCE plus reverse cross-entropy, halved:
    ``½ (CE_q→t + CE_t→q + RCE_q→t + RCE_t→q)`` (:func:`info_nce_loss`,
    :func:`reverse_cross_entropy`; IN2R weighs each direction's term by a further ½)."""
    sims = l2_normalize(queries) @ targets.t()
    return (info_nce_loss(sims, tau) + reverse_cross_entropy(sims, tau)) / 2

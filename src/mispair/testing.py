"""Reference computations and random inputs shared by the tests and the benchmarks.

The references are deliberately plain — one caption at a time, exact lengths, no padding, as the
papers' reference code computes — so that the vectorised library code can be checked (tests) and
timed (benchmarks) against them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mispair.nn.embedding import Fragments, l2_normalize, masked_mean
from mispair.nn.heads.sgr import SGRHead

# --- SGR / SAF as NCR computes them: one caption at a time, exact length, no padding ---------


def _l1(x: Tensor, dim: int) -> Tensor:
    return x / (x.abs().sum(dim=dim, keepdim=True) + 1e-8)


def _l2(x: Tensor, dim: int = -1) -> Tensor:
    return x / (x.pow(2).sum(dim=dim, keepdim=True).sqrt() + 1e-8)


def _self_attention(module: nn.Module, local: Tensor, norms: bool) -> Tensor:
    """VisualSA (``norms=True``) / TextSA on ``local [n, K, d]`` with all fragments real."""
    emb_local, emb_global = module.local(local), module.glob(local.mean(dim=1))
    if norms:
        emb_local, emb_global = module.local_norm(emb_local), module.glob_norm(emb_global)
    emb_local = module.dropout(torch.tanh(emb_local))
    emb_global = module.dropout(torch.tanh(emb_global))
    common = emb_local * emb_global.unsqueeze(1).repeat(1, local.shape[1], 1)
    weights = torch.softmax(module.common(common).squeeze(2), dim=1)
    return _l2((weights.unsqueeze(2) * local).sum(dim=1))


def _text_to_region(query: Tensor, context: Tensor, smooth: float = 9.0) -> Tensor:
    """Words ``query [n, L, d]`` attend to regions ``context [n, K, d]`` -> ``[n, L, d]``."""
    attn = F.leaky_relu(torch.bmm(context, query.transpose(1, 2)), 0.1)  # [n, K, L]
    attn = _l2(attn, dim=2).transpose(1, 2)  # normalised over the words
    attn = torch.softmax(attn * smooth, dim=2)
    return _l2(torch.bmm(attn, context))


def reference_similarities(head: nn.Module, images: Fragments, texts: Fragments) -> Tensor:
    """``[n_images, n_captions]`` as NCR's ``EncoderSimilarity.forward``, ``head``'s weights."""
    rep, regions = head.representation, images.local
    n_images = regions.shape[0]
    image_global = _self_attention(rep.visual_attention, regions, norms=True)
    columns = []
    for j in range(len(texts)):
        words = texts.local[j, : int(texts.lengths[j])].unsqueeze(0)
        words_expanded = words.repeat(n_images, 1, 1)
        text_global = _self_attention(rep.text_attention, words, norms=False)
        context = _text_to_region(words_expanded, regions)
        sim_local = _l2(rep.local_proj(torch.pow(context - words_expanded, 2)))
        sim_global = _l2(rep.global_proj(torch.pow(image_global - text_global, 2)))
        nodes = torch.cat([sim_global.unsqueeze(1), sim_local], dim=1)
        if isinstance(head, SGRHead):
            for step in head.steps:
                logits = torch.bmm(step.query(nodes), step.key(nodes).transpose(1, 2))
                edges = torch.softmax(logits, dim=-1)
                nodes = torch.relu(step.update(torch.bmm(edges, nodes)))
            vector = nodes[:, 0]
        else:
            filtration = head.filtration
            gates = filtration.norm(filtration.gate(nodes).permute(0, 2, 1))
            vector = _l2(torch.matmul(_l1(torch.sigmoid(gates), dim=-1), nodes).squeeze(1))
        columns.append(torch.sigmoid(head.score_proj(vector)))
    return torch.cat(columns, dim=1)


# --- inputs -----------------------------------------------------------------------------------


def random_images(n: int, regions: int, dim: int, seed: int) -> Fragments:
    gen = torch.Generator().manual_seed(seed)
    local = l2_normalize(torch.randn(n, regions, dim, generator=gen))
    return Fragments(local, torch.ones(n, regions, dtype=torch.bool), l2_normalize(local.mean(1)))


def random_texts(lengths: list[int], dim: int, seed: int, width: int | None = None) -> Fragments:
    """Captions of ``lengths`` words padded to ``width`` with large garbage values."""
    gen = torch.Generator().manual_seed(seed)
    width = width or max(lengths)
    mask = torch.arange(width)[None] < torch.tensor(lengths)[:, None]
    local = l2_normalize(torch.randn(len(lengths), width, dim, generator=gen))
    local = torch.where(mask[..., None], local, 50 * torch.randn(local.shape, generator=gen))
    return Fragments(local, mask, l2_normalize(masked_mean(local, mask)))

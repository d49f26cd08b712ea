"""Similarity representation of SGRAF (Diao et al., AAAI 2021), shared by the SGR and SAF heads.

For every image ``i`` and caption ``j`` it builds ``1 + L_j`` similarity *nodes* of size
``sim_dim``: one global node from the self-attended global embeddings and one local node per
word from text-to-region attention (SGRAF Eq. 1–4, NCR ``EncoderSimilarity``). Unlike the
reference, which loops over captions with their exact lengths, everything here is vectorised
over images × captions; padded words are masked so the real nodes are those of the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mispair.nn.embedding import Fragments, masked_mean

SMOOTH = 9.0  # λ, the inverse temperature of the text-to-region attention (SCAN, SGRAF)


def l1norm(x: Tensor, dim: int = -1, eps: float = 1e-8) -> Tensor:
    """``x / (Σ|x| + eps)`` along ``dim`` (the reference's epsilon convention)."""
    return x / (x.abs().sum(dim=dim, keepdim=True) + eps)


def l2norm(x: Tensor, dim: int = -1, eps: float = 1e-8) -> Tensor:
    """``x / (||x|| + eps)`` along ``dim`` (the reference's epsilon convention)."""
    return x / (torch.linalg.vector_norm(x, dim=dim, keepdim=True) + eps)


def xavier_init(*layers: nn.Linear) -> None:
    """Xavier-uniform weights and zero biases, as SGRAF initialises its linear layers."""
    for layer in layers:
        nn.init.xavier_uniform_(layer.weight)
        nn.init.zeros_(layer.bias)


def _squared_difference(a: Tensor, b: Tensor, *, reuse_a: bool = False) -> Tensor:
    """``(a - b)²``; without autograd in place (on ``a`` itself with ``reuse_a``)."""
    if torch.is_grad_enabled():
        return (a - b).square()
    return (a.sub_(b) if reuse_a else a - b).square_()


@dataclass
class ImageSide:
    """Per-image parts: ``regions [Bi, K, d]``, their Gram matrices ``gram [Bi, K, K]`` and the
    self-attended ``glob [Bi, d]``."""

    regions: Tensor
    gram: Tensor
    glob: Tensor


@dataclass
class TextSide:
    """Per-caption parts: ``words [Bt, L, d]``, ``mask [Bt, L]``, self-attended ``glob [Bt, d]``."""

    words: Tensor
    mask: Tensor
    glob: Tensor


class VisualSelfAttention(nn.Module):
    """Global image embedding by self-attention over regions (SGRAF Eq. 5, NCR ``VisualSA``).

    ``regions [B, K, d] -> [B, d]``: weights ``softmax_k(w·(tanh(BN_K(W_l v_k)) ⊙
    tanh(BN_d(W_g v̄))))`` on the raw region mean ``v̄``; output ``l2norm(Σ_k a_k v_k)``.
    The region batch norm has one channel per region position, so ``K`` must equal
    ``num_regions``.
    """

    def __init__(self, embed_dim: int, num_regions: int, dropout: float = 0.4) -> None:
        super().__init__()
        self.local = nn.Linear(embed_dim, embed_dim)
        self.local_norm = nn.BatchNorm1d(num_regions)
        self.glob = nn.Linear(embed_dim, embed_dim)
        self.glob_norm = nn.BatchNorm1d(embed_dim)
        self.common = nn.Linear(embed_dim, 1)
        self.dropout = nn.Dropout(dropout)
        xavier_init(self.local, self.glob, self.common)

    def forward(self, regions: Tensor) -> Tensor:
        local = self.dropout(torch.tanh(self.local_norm(self.local(regions))))
        glob = self.dropout(torch.tanh(self.glob_norm(self.glob(regions.mean(dim=1)))))
        weights = torch.softmax(self.common(local * glob[:, None]).squeeze(-1), dim=1)
        return l2norm((weights[..., None] * regions).sum(dim=1))


class TextSelfAttention(nn.Module):
    """Global caption embedding by self-attention over the real words (NCR ``TextSA``).

    ``words [B, L, d], mask [B, L] -> [B, d]``, as :class:`VisualSelfAttention` without batch
    norms, the mean and the softmax taken over the real words only.
    """

    def __init__(self, embed_dim: int, dropout: float = 0.4) -> None:
        super().__init__()
        self.local = nn.Linear(embed_dim, embed_dim)
        self.glob = nn.Linear(embed_dim, embed_dim)
        self.common = nn.Linear(embed_dim, 1)
        self.dropout = nn.Dropout(dropout)
        xavier_init(self.local, self.glob, self.common)

    def forward(self, words: Tensor, mask: Tensor) -> Tensor:
        local = self.dropout(torch.tanh(self.local(words)))
        glob = self.dropout(torch.tanh(self.glob(masked_mean(words, mask))))
        logits = self.common(local * glob[:, None]).squeeze(-1).masked_fill(~mask, float("-inf"))
        weights = torch.softmax(logits, dim=1)
        return l2norm((weights[..., None] * words).sum(dim=1))


def text_to_region_attention(regions: Tensor, words: Tensor, mask: Tensor) -> Tensor:
    """Attention of every word of every caption over the regions of every image (SCAN t2i).

    ``a = softmax_k(λ · l2norm_words(LeakyReLU_0.1(v_k · w_l)))``, the normalisation taken over
    the real words of the caption (as the reference's ``SCAN_attention`` with exact lengths).

    Args:
        regions: ``[Bi, K, d]``; words: ``[Bt, L, d]``; mask: ``[Bt, L]`` bool.

    Returns:
        ``[Bi, Bt * L, K]`` attention weights (rows of padded words are uniform).
    """
    (n_images, n_regions, dim), (n_texts, n_words) = regions.shape, mask.shape
    scores = regions.reshape(-1, dim) @ words.reshape(-1, dim).t()
    scores = F.leaky_relu(scores.view(n_images, n_regions, n_texts, n_words), 0.1)
    scores = l2norm(scores * mask.to(scores.dtype), dim=3)
    attention = torch.softmax(scores * SMOOTH, dim=1)
    return attention.permute(0, 2, 3, 1).reshape(n_images, n_texts * n_words, n_regions)


class SimilarityRepresentation(nn.Module):
    """Global and local similarity nodes of every image–caption pair (SGRAF §3.1).

    Local node of word ``l``: ``l2norm(W_loc (c_l − w_l)² + b)`` with ``c_l = l2norm(Σ_k a_lk
    v_k)`` the attended image context; global node: ``l2norm(W_glo (v̂ − t̂)² + b)`` of the
    self-attended global embeddings.

    Args:
        embed_dim: fragment size ``d`` (1024 in the papers).
        sim_dim: node size (256).
        num_regions: regions per image ``K`` (36 for BUTD features, 49 for a 7×7 grid).
    """

    def __init__(self, embed_dim: int = 1024, sim_dim: int = 256, num_regions: int = 36) -> None:
        super().__init__()
        self.visual_attention = VisualSelfAttention(embed_dim, num_regions)
        self.text_attention = TextSelfAttention(embed_dim)
        self.local_proj = nn.Linear(embed_dim, sim_dim)
        self.global_proj = nn.Linear(embed_dim, sim_dim)
        xavier_init(self.local_proj, self.global_proj)

    def encode_images(self, images: Fragments) -> ImageSide:
        """Per-image parts (all regions are taken as real)."""
        regions = images.local
        gram = regions @ regions.transpose(1, 2)
        return ImageSide(regions, gram, self.visual_attention(regions))

    def encode_texts(self, texts: Fragments) -> TextSide:
        """Per-caption parts, the word axis trimmed to the longest caption."""
        texts = texts.trimmed()
        return TextSide(texts.local, texts.mask, self.text_attention(texts.local, texts.mask))

    def forward(self, image: ImageSide, text: TextSide) -> tuple[Tensor, Tensor]:
        """Nodes ``[Bi, Bt, 1 + L, sim_dim]`` (global first) and their mask ``[Bt, 1 + L]``."""
        n_images, n_texts, n_words = len(image.glob), *text.mask.shape
        attention = text_to_region_attention(image.regions, text.words, text.mask)
        # ||Σ_k a_k v_k||² = aᵀ G a: normalise the weights, not the [Bi, Bt*L, d] context
        squared_norm = (torch.bmm(attention, image.gram) * attention).sum(dim=-1, keepdim=True)
        attention = attention / (squared_norm.clamp(min=0).sqrt() + 1e-8)
        context = torch.bmm(attention, image.regions)  # l2-normalised, [Bi, Bt*L, d]
        words = text.words.reshape(1, n_texts * n_words, -1)
        local = l2norm(self.local_proj(_squared_difference(context, words, reuse_a=True)))
        glob = l2norm(self.global_proj(_squared_difference(image.glob[:, None], text.glob[None])))
        local = local.view(n_images, n_texts, n_words, -1)
        nodes = torch.cat([glob[:, :, None], local], dim=2)
        return nodes, F.pad(text.mask, (1, 0), value=True)

    def pair_bytes(self, n_words: int) -> int:
        """Rough peak bytes of :meth:`forward` per image–caption pair (float32)."""
        dim, sim_dim = self.local_proj.in_features, self.local_proj.out_features
        n_regions = self.visual_attention.local_norm.num_features
        return 4 * (n_words * (2 * dim + 4 * n_regions + 3 * sim_dim) + dim + 2 * sim_dim)


class SimilarityNodeHead(nn.Module):
    """Base of the SGRAF heads: nodes → ``aggregate`` → ``sigmoid(Linear(sim_dim → 1))``.

    Subclasses implement ``aggregate(nodes [Bi, Bt, N, S], mask [Bt, N]) -> [Bi, Bt, S]``. The
    head can also score in two stages, ``score(prepare_images(i), prepare_texts(t))``, which
    :func:`mispair.nn.allpairs.all_pair_similarities` uses to encode each side once.
    """

    def __init__(self, embed_dim: int, sim_dim: int, num_regions: int) -> None:
        super().__init__()
        self.required_regions = num_regions  # the region batch norm is sized for this many
        self.representation = SimilarityRepresentation(embed_dim, sim_dim, num_regions)
        self.score_proj = nn.Linear(sim_dim, 1)
        xavier_init(self.score_proj)

    def aggregate(self, nodes: Tensor, mask: Tensor) -> Tensor:
        raise NotImplementedError

    def prepare_images(self, images: Fragments) -> ImageSide:
        return self.representation.encode_images(images)

    def prepare_texts(self, texts: Fragments) -> TextSide:
        return self.representation.encode_texts(texts)

    def score(self, image: ImageSide, text: TextSide) -> Tensor:
        """``[Bi, Bt]`` similarities in (0, 1) from prepared sides."""
        nodes, mask = self.representation(image, text)
        return torch.sigmoid(self.score_proj(self.aggregate(nodes, mask))).squeeze(-1)

    def pair_bytes(self, n_words: int) -> int:
        """Rough peak bytes per image–caption pair, for choosing block sizes."""
        sim_dim = self.score_proj.in_features
        return self.representation.pair_bytes(n_words) + 4 * 3 * (n_words + 1) * (sim_dim + n_words)

    def forward(self, images: Fragments, texts: Fragments) -> Tensor:
        return self.score(self.prepare_images(images), self.prepare_texts(texts))

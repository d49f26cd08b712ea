r"""CAM head: cross-attention matching (SCAN-like t2i), with or without partial matching.

OMIT's baseline (Appendix A1.1, Eq. 10–11; Tables 3–4): every word attends to the regions,

.. math::
    \eta_{ij} = \tfrac{1}{L}\,\mathrm{softmax}_i(v_i^\top t_j/\tau), \qquad
    S_\text{CAM} = \sum_{ij} \frac{\eta_{ij}}{\lVert\sum_i \eta_{ij} v_i\rVert}\, v_i^\top t_j
    = \frac1L \sum_j \cos\Big(\sum_i \eta_{ij} v_i,\ t_j\Big).

*Partial CAM* (Table 4) applies OMIT's dustbin to the attention (the paper gives no equation;
this is our reading of Eq. 4–5 for CAM): the image's global embedding :math:`\bar v` joins the
regions as one more key, the word's context keeps its full norm, but only the real regions
count in the numerator,

.. math::
    S = \frac1L \sum_j \frac{\sum_{i \le K} \hat\eta_{ij}\, v_i^\top t_j}
    {\lVert \hat\eta_{0j} \bar v + \sum_{i \le K} \hat\eta_{ij} v_i \rVert},
    \quad \hat\eta_{\cdot j} = \mathrm{softmax}(\bar v^\top t_j/\tau,\ v_1^\top t_j/\tau, \dots),

so a word that attends mostly to the dustbin (no matching region) contributes little.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from mispair.nn.embedding import Fragments, l2_normalize
from mispair.nn.heads import register_head


def cam_similarity(images: Fragments, texts: Fragments, tau: float, partial: bool) -> Tensor:
    """``[Bi, Bt]`` CAM similarities (see the module docstring), vectorised over all pairs.

    The context norm uses the Gram matrix of each image's keys,
    :math:`\\lVert \\sum_i \\eta_i x_i\\rVert^2 = \\eta^\\top G \\eta`, so no
    ``[Bi, Bt, L, d]`` context is built.
    """
    keys, key_mask = l2_normalize(images.local), images.mask
    if partial:
        keys = torch.cat([l2_normalize(images.pooled)[:, None], keys], 1)
        key_mask = nn.functional.pad(key_mask, (1, 0), value=True)
    words, word_mask = l2_normalize(texts.local), texts.mask
    (n_img, n_keys, dim), (n_txt, n_words) = keys.shape, word_mask.shape
    sims = (keys.reshape(-1, dim) @ words.reshape(-1, dim).t()).view(n_img, n_keys, n_txt, n_words)
    logits = sims.masked_fill(~key_mask[:, :, None, None], float("-inf")) / tau
    attention = torch.softmax(logits, dim=1)  # [Bi, K', Bt, L]
    gram = keys @ keys.transpose(1, 2)  # [Bi, K', K']
    flat = attention.reshape(n_img, n_keys, n_txt * n_words)
    norm = ((gram @ flat) * flat).sum(1).clamp(min=0).sqrt().view(n_img, n_txt, n_words)
    real = slice(1, None) if partial else slice(None)
    numerator = (attention[:, real] * sims[:, real]).sum(1)  # [Bi, Bt, L]
    per_word = numerator / norm.clamp(min=1e-8) * word_mask
    return per_word.sum(-1) / word_mask.sum(-1).clamp(min=1)


@register_head("cam")
class CAMHead(nn.Module):
    """Cross-attention matching, ``[Bi, Bt]`` in [-1, 1].

    Options: ``tau`` softmax temperature τ of Eq. 11 (0.1; SCAN's λ = 9 is τ ≈ 0.11),
    ``partial`` (the visual dustbin of Partial CAM, Table 4), ``num_regions`` (fragments per
    image, only to size evaluation blocks).
    """

    def __init__(
        self, embed_dim: int, tau: float = 0.1, partial: bool = False, num_regions: int = 36
    ) -> None:
        super().__init__()
        self.tau, self.partial, self.num_regions = tau, partial, num_regions

    def prepare_images(self, images: Fragments) -> Fragments:
        return images

    def prepare_texts(self, texts: Fragments) -> Fragments:
        """Captions with the word axis trimmed to the longest one."""
        return texts.trimmed()

    def score(self, images: Fragments, texts: Fragments) -> Tensor:
        return cam_similarity(images, texts, self.tau, self.partial)

    def pair_bytes(self, n_words: int) -> int:
        """Rough peak bytes per pair: ~6 float32 ``(K + 1) × L`` tensors."""
        return 4 * 6 * (self.num_regions + 1) * max(n_words, 1)

    def forward(self, images: Fragments, texts: Fragments) -> Tensor:
        return self.score(images, self.prepare_texts(texts))

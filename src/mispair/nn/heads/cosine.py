"""VSE head: cosine similarity of the pooled embeddings."""

from __future__ import annotations

from torch import Tensor, nn

from mispair.nn.embedding import Fragments, l2_normalize
from mispair.nn.heads import register_head


@register_head("cosine")
class CosineHead(nn.Module):
    """``S_ij = cos(pooled image i, pooled caption j)``, ``[Bi, Bt]`` in [-1, 1]."""

    needs_fragments = False  # reads the pooled embeddings only
    vector_search = True  # a dot product of unit vectors: an inner-product index finds its best matches

    def __init__(self, embed_dim: int) -> None:
        super().__init__()
        self.embed_dim = embed_dim

    def forward(self, images: Fragments, texts: Fragments) -> Tensor:
        return l2_normalize(images.pooled) @ l2_normalize(texts.pooled).t()

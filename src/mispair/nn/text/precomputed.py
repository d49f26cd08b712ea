"""A text encoder over captions given as vectors (a table's text-embedding column).

The vectors come from any frozen encoder the user ran (CLIP's text tower, a sentence model); the
encoder learns a projection of them into the joint space, as the image side projects the image
vectors. The batch's token ids name each caption's vector (:mod:`mispair.data.text_vectors`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from mispair.config import ModelConfig
from mispair.data.text_vectors import lookup_vectors
from mispair.nn.embedding import Fragments, l2_normalize
from mispair.nn.text import register_text_encoder


@register_text_encoder("precomputed")
class PrecomputedTextEncoder(nn.Module):
    """``Linear(text_dim → embed_dim)`` of each caption's given vector, L2-normalised.

    Input: ids ``[B, L]`` naming each caption's vector and ``lengths [B]``; output ``Fragments``
    with one fragment per caption: ``local [B, 1, embed_dim]``, ``pooled [B, embed_dim]`` (the
    same embedding), the norm before normalisation in ``norms [B, 1]``.
    """

    tokenizer = "precomputed"
    reads_caption_vectors = True  # pooled = l2n(fc(the caption's vector))
    given_vectors = True  # its inputs are vectors given with the collection, not a tokenizer's ids

    def __init__(self, text_dim: int, embed_dim: int = 1024) -> None:
        super().__init__()
        # initialised as the frozen MiniLM encoder's projection: a run on MiniLM's mean-pooled
        # states given as vectors draws the same random weights as the run on MiniLM itself
        self.fc = nn.Linear(text_dim, embed_dim)

    @classmethod
    def from_config(cls, cfg: ModelConfig, vocab_size: int) -> PrecomputedTextEncoder:
        """``vocab_size``: the caption vectors' dimension (what a run with caption vectors
        records in its place)."""
        return cls(vocab_size, cfg.embed_dim)

    def caption_vectors(self, token_lists: Sequence[Sequence[int]]) -> Tensor:
        """``[n, text_dim]`` the vector of each caption of ``token_lists`` (what :attr:`fc` projects)."""
        if not token_lists:
            return torch.zeros(0, self.fc.in_features)
        return torch.from_numpy(lookup_vectors(token_lists))

    def batch_vectors(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """``[B, text_dim]`` the vector of each caption of a batch (ids ``[B, L]``)."""
        return torch.from_numpy(lookup_vectors(tokens.cpu().tolist())).to(tokens.device)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Fragments:
        vectors = self.batch_vectors(tokens, lengths)
        projected = self.fc(vectors.to(self.fc.weight.dtype))
        pooled = l2_normalize(projected)
        mask = torch.ones(len(tokens), 1, dtype=torch.bool, device=tokens.device)
        return Fragments(pooled[:, None], mask, pooled, projected.norm(dim=-1)[:, None])

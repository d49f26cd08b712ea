"""Image and text encoders producing :class:`Fragments` (NCR / SCAN style)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from mispair.nn.embedding import Fragments, l2_normalize, masked_mean


class FragmentImageEncoder(nn.Module):
    """Projects precomputed fragment features (regions or grid cells) into the joint space.

    ``Linear(feature_dim → embed_dim)``, optionally followed by a residual two-layer MLP
    (``mlp=True``), then L2-normalised per fragment (SCAN/NCR ``EncoderImagePrecomp``); the norms
    before normalisation are kept in ``Fragments.norms``.

    Input ``[B, K, feature_dim]``; output ``Fragments`` with ``local [B, K, embed_dim]`` and
    ``pooled [B, embed_dim]`` (the normalised mean of the fragments).
    """

    def __init__(self, feature_dim: int, embed_dim: int = 1024, *, mlp: bool = False) -> None:
        super().__init__()
        self.fc = nn.Linear(feature_dim, embed_dim)
        self.mlp = (
            nn.Sequential(
                nn.Linear(feature_dim, embed_dim // 2),
                nn.ReLU(),
                nn.Linear(embed_dim // 2, embed_dim),
            )
            if mlp
            else None
        )
        # Xavier-uniform initialisation of the projection, as in SCAN/NCR
        bound = (6.0 / (feature_dim + embed_dim)) ** 0.5
        nn.init.uniform_(self.fc.weight, -bound, bound)
        nn.init.zeros_(self.fc.bias)

    def forward(self, features: Tensor) -> Fragments:
        features = features.to(self.fc.weight.dtype)
        local = self.fc(features)
        if self.mlp is not None:
            local = local + self.mlp(features)
        norms, local = local.norm(dim=-1), l2_normalize(local)
        mask = torch.ones(local.shape[:2], dtype=torch.bool, device=local.device)
        return Fragments(local, mask, l2_normalize(local.mean(dim=1)), norms)


class BiGRUTextEncoder(nn.Module):
    """Word embeddings → bidirectional GRU, both directions averaged, L2-normalised per word
    (the norms before normalisation kept in ``Fragments.norms``).

    As NCR's ``EncoderText`` (word_dim 300, one layer). Input token ids ``[B, L]`` (0 = padding)
    and ``lengths [B]``; output ``Fragments`` with ``local [B, L, embed_dim]``, ``mask [B, L]`` and
    ``pooled [B, embed_dim]`` (normalised mean of the real words).
    """

    def __init__(
        self, vocab_size: int, word_dim: int = 300, embed_dim: int = 1024, num_layers: int = 1
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, word_dim, padding_idx=0)
        self.rnn = nn.GRU(word_dim, embed_dim, num_layers, batch_first=True, bidirectional=True)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Fragments:
        lengths = lengths.clamp(min=1)
        words = self.embed(tokens)
        packed = pack_padded_sequence(words, lengths.cpu(), batch_first=True, enforce_sorted=False)
        output, _ = self.rnn(packed)
        output, _ = pad_packed_sequence(output, batch_first=True, total_length=tokens.shape[1])
        half = output.shape[2] // 2
        local = (output[:, :, :half] + output[:, :, half:]) / 2
        norms, local = local.norm(dim=-1), l2_normalize(local)
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        mask = positions[None, :] < lengths[:, None].to(tokens.device)
        return Fragments(local, mask, l2_normalize(masked_mean(local, mask)), norms)

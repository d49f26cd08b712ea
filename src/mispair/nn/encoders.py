"""The image encoder producing :class:`Fragments` (NCR / SCAN style); text encoders are in
:mod:`mispair.nn.text`."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from mispair.nn.embedding import Fragments, l2_normalize


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

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
    ``pooled [B, embed_dim]``: with ``pooling="fragments"`` the normalised mean of the normalised
    fragment embeddings (NCR), with ``pooling="features"`` the normalised projection of the mean
    feature (the pretrained backbone: one linear map of the pooled grid). ``fragments=False``
    (for heads that read ``pooled`` only, with ``pooling="features"``) skips the projection of
    each fragment: ``local`` is then the pooled embedding as a single fragment ``[B, 1, d]``.
    """

    def __init__(
        self,
        feature_dim: int,
        embed_dim: int = 1024,
        *,
        mlp: bool = False,
        pooling: str = "fragments",
        fragments: bool = True,
    ) -> None:
        super().__init__()
        if pooling not in ("fragments", "features"):
            raise ValueError(f"pooling: fragments or features, got {pooling!r}")
        self.pooling = pooling
        self.fragments = fragments or pooling == "fragments"
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

    def project(self, features: Tensor) -> Tensor:
        """``[..., feature_dim] -> [..., embed_dim]``: the linear map (plus the MLP when set)."""
        out = self.fc(features)
        return out if self.mlp is None else out + self.mlp(features)

    def forward(self, features: Tensor) -> Fragments:
        features = features.to(self.fc.weight.dtype)
        if self.fragments:
            local = self.project(features)
            norms, local = local.norm(dim=-1), l2_normalize(local)
        if self.pooling == "features":
            pooled = self.project(features.mean(dim=1))
            if not self.fragments:
                norms, local = pooled.norm(dim=-1)[:, None], l2_normalize(pooled)[:, None]
            pooled = l2_normalize(pooled)
        else:
            pooled = l2_normalize(local.mean(dim=1))
        mask = torch.ones(local.shape[:2], dtype=torch.bool, device=local.device)
        return Fragments(local, mask, pooled, norms)

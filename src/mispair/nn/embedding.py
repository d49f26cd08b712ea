"""The one embedding type every encoder produces and every similarity head consumes."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Fragments:
    """A batch of fragment embeddings (image regions / grid cells, or caption words).

    Attributes:
        local: ``[B, K, d]`` fragment embeddings (padding positions hold arbitrary finite values).
        mask: ``[B, K]`` bool, True where a fragment is real (all True for images).
        pooled: ``[B, d]`` a global embedding of each item (L2-normalised mean of the real
            fragments for the standard encoders).
        norms: ``[B, K]`` the norms of the fragments before the encoder normalised them (OMIT's
            ``norm`` marginals, Eq. 7), or None (then taken from ``local``).
    """

    local: Tensor
    mask: Tensor
    pooled: Tensor
    norms: Tensor | None = None

    @property
    def fragment_norms(self) -> Tensor:
        """``[B, K]``: ``norms`` if the encoder kept them, else the norms of ``local``."""
        return self.local.norm(dim=-1) if self.norms is None else self.norms

    def __len__(self) -> int:
        return self.local.shape[0]

    @property
    def lengths(self) -> Tensor:
        """``[B]`` long: the number of real fragments of each item."""
        return self.mask.sum(dim=1)

    def __getitem__(self, index: slice | Tensor) -> Fragments:
        """Select items (rows) by slice, index tensor or bool mask."""
        norms = None if self.norms is None else self.norms[index]
        return Fragments(self.local[index], self.mask[index], self.pooled[index], norms)

    def trimmed(self) -> Fragments:
        """The same items with the fragment axis cut to the longest item (at least 1 wide)."""
        width = max(int(self.lengths.max()), 1) if len(self) else 1
        norms = None if self.norms is None else self.norms[:, :width]
        return Fragments(self.local[:, :width], self.mask[:, :width], self.pooled, norms)

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> Fragments:
        local = self.local.to(device=device, dtype=dtype or self.local.dtype)
        pooled = self.pooled.to(device=device, dtype=dtype or self.pooled.dtype)
        norms = None if self.norms is None else self.norms.to(device=device, dtype=local.dtype)
        return Fragments(local, self.mask.to(device), pooled, norms)

    def detach(self) -> Fragments:
        norms = None if self.norms is None else self.norms.detach()
        return Fragments(self.local.detach(), self.mask, self.pooled.detach(), norms)

    @staticmethod
    def cat(parts: list[Fragments]) -> Fragments:
        """Concatenate batches along the item axis, padding the fragment axis to the longest."""
        width = max(p.local.shape[1] for p in parts)
        locals_, masks, norms = [], [], []
        for p in parts:
            pad = width - p.local.shape[1]
            locals_.append(torch.nn.functional.pad(p.local, (0, 0, 0, pad)))
            masks.append(torch.nn.functional.pad(p.mask, (0, pad), value=False))
            norms.append(torch.nn.functional.pad(p.fragment_norms, (0, pad)))
        keep = any(p.norms is not None for p in parts)
        pooled = torch.cat([p.pooled for p in parts])
        return Fragments(torch.cat(locals_), torch.cat(masks), pooled, torch.cat(norms) if keep else None)


def masked_mean(local: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``local [B, K, d]`` over the real fragments of ``mask [B, K]`` -> ``[B, d]``.

    Rows without any real fragment give zeros (never NaN).
    """
    weights = mask.to(local.dtype).unsqueeze(-1)
    total = (local * weights).sum(dim=1)
    return total / weights.sum(dim=1).clamp(min=1.0)


def l2_normalize(x: Tensor, dim: int = -1, eps: float = 1e-8) -> Tensor:
    """``x / ||x||`` along ``dim``, safe for zero vectors."""
    return x / x.norm(dim=dim, keepdim=True).clamp(min=eps)

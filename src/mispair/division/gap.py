"""MGCS's modality-gap-corrected similarity (Wang, Gu and Yang, "Noisy Correspondence Learning with
Modality Gap Direction Correction", AAAI 2026, Eq. 3–7; public code ``wwyq1/MGCS``, whose core
files were not available to us: docs/faithfulness.md).

The two modalities' embeddings of a matched pair are offset from each other, and the offset's
direction is shared by similar pairs (the "sample-level alignment drift"). A pair whose offset
points where its neighbours' offsets point is consistent with the data's gap; a mismatched pair's
offset points elsewhere. MGCS multiplies each similarity by the cosine between the pair's offset
and the mean offset of its image's nearest images' pairs.
"""

from __future__ import annotations

import torch
from torch import Tensor

from mispair.nn.embedding import l2_normalize


def drift_agreement(images: Tensor, texts: Tensor, neighbours: int = 5) -> Tensor:
    """``[N]``: ``f_ii = cos(m_ii, m̄_i)`` for each pair ``i`` of ``images [N, D]``, ``texts
    [N, D]``: ``m_ii = v_i − u_i`` its offset (Eq. 3, embeddings as encoded, no centring) and
    ``m̄_i`` the mean offset of the pairs of its ``neighbours`` most cosine-similar images, the
    pair itself excluded (Eq. 5, n = 5; Eq. 6). In ``[-1, 1]``."""
    offsets = images - texts
    sims = l2_normalize(images) @ l2_normalize(images).t()
    sims.fill_diagonal_(float("-inf"))
    nearest = sims.topk(min(neighbours, len(images) - 1), dim=1).indices
    expected = offsets[nearest].mean(dim=1)
    return torch.nn.functional.cosine_similarity(offsets, expected, dim=1)


def gap_corrected_similarity(images: Tensor, texts: Tensor, neighbours: int = 5) -> Tensor:
    """``[N]``: ``S(I_i, T_i) · f_ii``, each pair's cosine similarity scaled by its drift agreement
    (:func:`drift_agreement`; MGCS Eq. 7's corrected positive term)."""
    own = (l2_normalize(images) * l2_normalize(texts)).sum(dim=1)
    return own * drift_agreement(images, texts, neighbours)

"""GSC's structure-consistency detector (Zhao et al., "Mitigating Noisy Correspondence by
Geometrical Structure Consistency Learning", CVPR 2024; public code ``MediaBrain-SJTU/GSC``,
``model/RINCE.py``).

A matched pair's image and caption sit among the other pairs in the same way: the image's
similarities to the other images agree with the caption's similarities to the other captions. A
mismatched pair's two halves have unrelated neighbourhoods. The score compares the two intra-modal
similarity rows, not the pair's own cross-modal similarity, so it is a second, independent
detector. Anchors that are themselves mismatched would blur both rows, so each anchor column is
weighted by its clean probability.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from mispair.division.scores import mixture_clean_probability
from mispair.nn.embedding import l2_normalize


def structure_consistency(
    images: Tensor, texts: Tensor, anchor_weight: Tensor, *, chunk: int = 1024
) -> Tensor:
    """``[N]``: ``cos(t ⊙ S^I_i, t ⊙ S^T_i)`` for each pair ``i`` of ``images [N, D]``,
    ``texts [N, D]`` (pair ``i`` = row ``i`` of both), with ``S^I = V Vᵀ`` and ``S^T = U Uᵀ`` the
    cosine similarities within each modality over the same ``N`` pairs as anchors (the pair's own
    column included) and ``t = anchor_weight [N]`` each anchor's clean probability (GSC's
    ``topo`` score: the cosine of the two clean-weighted relation rows, no softmax, no
    temperature). GSC's head scores image–image and text–text pairs with its SGR head and a
    sigmoid; on a dual encoder the cosine is the similarity within a modality. Computed ``chunk``
    rows at a time (memory ``chunk × N``)."""
    images, texts = l2_normalize(images.float()), l2_normalize(texts.float())
    weight = anchor_weight.to(images.dtype)[None, :]
    out = images.new_empty(len(images))
    for start in range(0, len(images), chunk):
        rows = slice(start, start + chunk)
        image_row, text_row = (images[rows] @ images.t()) * weight, (texts[rows] @ texts.t()) * weight
        out[rows] = torch.nn.functional.cosine_similarity(image_row, text_row, dim=1)
    return out


def structure_checked_probability(images: Tensor, texts: Tensor, pair_score: np.ndarray) -> np.ndarray:
    """``[N]``: GSC's clean label of each pair, ``min(y_CM, y_IM)``: ``y_CM`` the mixture clean
    probability of its cross-modal ``pair_score [N]``, ``y_IM`` that of its structure consistency
    (:func:`structure_consistency`) with the anchors weighted by ``y_CM``. A pair is trusted only
    when both detectors trust it. (GSC also smooths both labels over epochs, weight 0.7 on the new
    value: here a held-out score is computed once per scorer, and the repeats' average plays
    that part.)"""
    cross_modal = mixture_clean_probability(pair_score)
    weight = torch.from_numpy(cross_modal).to(images.dtype)
    structure = structure_consistency(images, texts, weight).double().cpu().numpy()
    return np.minimum(cross_modal, mixture_clean_probability(structure))

"""The ``contrast`` score of held-out pairs: how a pair's image and caption pick each other out
among the pairs of their fold (InfoNCE's two log-probabilities), read a block of images at a time,
with the same score of decoy pairs from the same similarities."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor


def contrast_scores(
    sims: Tensor | Callable[[int, int], Tensor],
    n_images: int,
    image_of_caption: Tensor,
    tau: float,
    *,
    chunk: int = 256,
) -> Tensor:
    """``[n_captions]``: for similarities ``[n_images, n_captions]`` and each caption's paired
    image, ½ (log p(image | caption) + log p(caption | image)), softmaxes of ``sims / tau`` over
    all images, and over the captions of other images plus this one.

    ``sims`` is the matrix, or ``rows(start, stop)`` giving its rows ``start:stop``: the matrix
    is then read ``chunk`` images at a time and never held whole (memory ``chunk × n_captions``).
    """
    return contrast_with_decoys(sims, n_images, image_of_caption, tau, chunk=chunk).score


@dataclass(frozen=True)
class ContrastScores:
    """``score [n_captions]``: :func:`contrast_scores`; ``decoys [m]``: the decoys'
    (:func:`contrast_with_decoys`)."""

    score: Tensor
    decoys: Tensor


def contrast_with_decoys(
    sims: Tensor | Callable[[int, int], Tensor],
    n_images: int,
    image_of_caption: Tensor,
    tau: float,
    *,
    chunk: int = 256,
    decoys: Tensor | None = None,
) -> ContrastScores:
    """:func:`contrast_scores`, and those of ``decoys [m, 2]`` (caption, image): caption ``c``
    shown with image ``i``, ½ (log p(i | c) + log p(c | i)), where p(i | c) is the softmax over
    the images other than ``c``'s own and p(c | i) over the captions of images other than ``i``
    (among them ``c``): the scores of a caption and a picture whose true partners are not in the
    fold, from the same similarities (each decoy reads one more entry)."""
    rows = sims if callable(sims) else (lambda start, stop: sims[start:stop])
    n_captions = len(image_of_caption)
    decoys = torch.zeros((0, 2), dtype=torch.int64) if decoys is None else decoys
    column_lse_others = torch.full((n_captions,), float("-inf"))  # each caption's images but its own
    positive, others = torch.zeros(n_captions), torch.zeros(n_captions)
    image_lse_others = torch.zeros(n_images)
    shown = torch.zeros(len(decoys))
    for start in range(0, n_images, chunk):
        logits = rows(start, min(start + chunk, n_images)) / tau
        image = torch.arange(start, start + logits.shape[0])
        same_image = image_of_caption[None, :] == image[:, None]
        masked = logits.masked_fill(same_image, float("-inf"))
        column_lse_others = torch.logaddexp(column_lse_others, torch.logsumexp(masked, dim=0))
        other_lse = torch.logsumexp(masked, dim=1)
        mine = torch.nonzero((image_of_caption >= start) & (image_of_caption < image[-1] + 1)).squeeze(1)
        local = image_of_caption[mine] - start
        positive[mine], others[mine] = logits[local, mine], other_lse[local]
        if len(decoys):
            image_lse_others[start : start + logits.shape[0]] = other_lse
            here = torch.nonzero((decoys[:, 1] >= start) & (decoys[:, 1] <= image[-1])).squeeze(1)
            shown[here] = logits[decoys[here, 1] - start, decoys[here, 0]]
    column_lse = torch.logaddexp(column_lse_others, positive)  # every image: the others and its own
    caption_to_image = positive - column_lse
    image_to_caption = positive - torch.logaddexp(others, positive)
    decoy_scores = torch.zeros(0)
    if len(decoys):
        decoy_caption_to_image = shown - column_lse_others[decoys[:, 0]]
        decoy_image_to_caption = shown - image_lse_others[decoys[:, 1]]
        decoy_scores = (decoy_caption_to_image + decoy_image_to_caption) / 2
    return ContrastScores((caption_to_image + image_to_caption) / 2, decoy_scores)

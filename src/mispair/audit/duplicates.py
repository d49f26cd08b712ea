"""Duplicates and leaks among an audited collection's pairs.

- **Near-duplicate images**: two images whose input features (mean-pooled over fragments,
  L2-normalised) have cosine similarity at least :data:`NEAR_DUPLICATE_COSINE`. The features are
  what every collection has (picture files and precomputed arrays alike), so no picture needs to
  be read again. On Tux Paint (EfficientNet-Lite0 features; the median cosine of two stamps is
  0.25) 9 of 950 stamps pass 0.99: the same fireman filed twice, the three stoplights, ``l`` and
  ``I``, ``≤`` and ``≥``.
- **Identical captions on different images**: captions equal after case folding and collapsing
  white space.
- **Leaks**: a dev or test pair whose image is a near-duplicate of a training image (or the same
  picture) that carries the identical caption: the evaluation would score a pair the model
  trained on.

The similarities are read ``chunk`` images at a time (memory: chunk × images) up to
:data:`~mispair.data.content.EXACT_IMAGES` images; above, short projections are compared first
and the candidates checked on their full vectors, with the same result
(:func:`~mispair.data.content.near_duplicate_edges`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mispair.data.content import NEAR_DUPLICATE_COSINE, near_duplicate_edges, pooled
from mispair.data.mapped import rows


@dataclass
class Duplicates:
    """``duplicate_of [n_images]``: the first other image (lowest index) that nearly duplicates
    each image, or −1; ``same_caption_images [n_pairs]``: how many other images carry each pair's
    caption; ``leak [n_pairs]``: the dev/test pairs that repeat a training pair."""

    duplicate_of: np.ndarray
    same_caption_images: np.ndarray
    leak: np.ndarray
    threshold: float

    def summary(self, image_of_caption: np.ndarray) -> dict[str, Any]:
        """The counts ``summary.json`` holds under ``duplicates``."""
        return {
            "method": "cosine similarity of the mean-pooled image features",
            "threshold": self.threshold,
            "images_with_near_duplicate": int((self.duplicate_of >= 0).sum()),
            "pairs_with_near_duplicate_image": int((self.duplicate_of[image_of_caption] >= 0).sum()),
            "pairs_with_caption_on_other_images": int((self.same_caption_images > 0).sum()),
            "leaks": int(self.leak.sum()),
        }


def find_duplicates(
    features: np.ndarray,
    captions: Sequence[str],
    image_of_caption: np.ndarray,
    split: np.ndarray,
    *,
    train_split: str = "train",
    threshold: float = NEAR_DUPLICATE_COSINE,
    chunk: int = 512,
) -> Duplicates:
    """:class:`Duplicates` of a collection: ``features [n_images, K, D]`` (or ``[n_images, D]``),
    ``captions [n_pairs]`` paired with ``image_of_caption [n_pairs]``, ``split [n_pairs]``."""
    norm = [normalized(c) for c in captions]
    return Duplicates(
        near_duplicates(features, threshold, chunk),
        same_caption_images(norm, image_of_caption),
        leaks(features, norm, image_of_caption, np.asarray(split) == train_split, threshold),
        threshold,
    )


def normalized(caption: str) -> str:
    """A caption as compared for identity: case folded, white space collapsed."""
    return " ".join(caption.casefold().split())


def near_duplicates(features: np.ndarray, threshold: float, chunk: int = 512) -> np.ndarray:
    """``[n]`` the lowest index of another image of ``features [n, ...]`` whose pooled features
    have cosine similarity ≥ ``threshold`` with its own, or −1 (the pairs of
    :func:`~mispair.data.content.near_duplicate_edges`)."""
    first, second = near_duplicate_edges(features, threshold, chunk)
    lowest = np.full(len(features), len(features), dtype=np.int64)
    np.minimum.at(lowest, second, first)  # first < second: the lower partner of each pair
    np.minimum.at(lowest, first, second)
    return np.where(lowest < len(features), lowest, -1)


def same_caption_images(captions: Sequence[str], image_of_caption: np.ndarray) -> np.ndarray:
    """``[n_pairs]`` how many images other than a pair's own carry its (normalised) caption."""
    images: dict[str, set[int]] = defaultdict(set)
    for caption, image in zip(captions, image_of_caption):
        images[caption].add(int(image))
    return np.array([len(images[c]) - 1 for c in captions], dtype=np.int64)


def leaks(
    features: np.ndarray,
    captions: Sequence[str],
    image_of_caption: np.ndarray,
    train: np.ndarray,
    threshold: float,
    block: int = 4096,
) -> np.ndarray:
    """``[n_pairs]`` True for each pair outside training (``train [n_pairs]`` False) with the same
    (normalised) caption as a training pair whose image's pooled features have cosine ≥
    ``threshold`` with its own; the features of ``block`` such pairs' images read at a time."""
    trained: dict[str, list[int]] = defaultdict(list)
    for caption, image, is_train in zip(captions, image_of_caption, train):
        if is_train:
            trained[caption].append(int(image))
    leak = np.zeros(len(captions), dtype=bool)
    checked = [k for k in np.flatnonzero(~np.asarray(train)) if captions[k] in trained]
    for start in range(0, len(checked), block):
        part = checked[start : start + block]
        needed = np.unique([i for k in part for i in (int(image_of_caption[k]), *trained[captions[k]])])
        vectors = pooled(rows(features, needed))
        row_of = {int(image): n for n, image in enumerate(needed)}
        for k in part:
            own = vectors[row_of[int(image_of_caption[k])]]
            others = vectors[[row_of[i] for i in trained[captions[k]]]]
            leak[k] = bool((others @ own >= threshold).any())
    return leak

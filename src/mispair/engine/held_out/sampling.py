"""How the held-out pairs are dealt: folds by content, contrast groups within a fold, the groups
of the other splits, the cells decoys are drawn in, and a scorer's sample of training pairs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mispair.data.batching import TrainingPairs
from mispair.data.content import ContentGroups, content_folds, fold_groups
from mispair.engine.held_out.decoys import local_decoys
from mispair.seeds import child_seed

CONTRAST_IMAGES = 4096
"""The most images a ``contrast`` score weighs a pair against: a larger fold is scored in content
groups of about this many images (:func:`contrast_groups`), so the score's cost grows linearly
with the collection, not with the square of a fold (Tux Paint's and OpenClipart's folds, 150 and
1,080 images, are scored whole)."""

FOLDS_BY = "content"
"""How the folds are dealt (part of the cache key: scores kept from folds dealt by image index
before are computed again)."""


def fold_seeds(run_seed: int, repeats: int) -> list[int]:
    """The seed of each repeat's partition into folds."""
    return [child_seed(run_seed, "repeat", r) for r in range(repeats)]


def scorer_seed(repeat_seed: int, fold: int, folds: int) -> int:
    """The run seed of the scorer that holds ``fold`` of ``folds`` out in a repeat."""
    return child_seed(repeat_seed, "fold", fold, folds)


def dealt_folds(content: ContentGroups, train: TrainingPairs, folds: int, seeds: list[int]) -> np.ndarray:
    """``[repeats, n_pairs]``: the fold of every pair in each repeat's partition (one seed each)."""
    return np.stack([content_folds(content, train.image_of_caption, folds, seed) for seed in seeds])


def other_group_images(train_images: int, folds: int) -> int:
    """The images of a group of the other splits: a training fold's, at most :data:`CONTRAST_IMAGES`."""
    return min(-(-train_images // folds), CONTRAST_IMAGES)


def other_groups(others: TrainingPairs, group_images: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``([n_pairs], [n_pairs])``: the group of every pair of the other splits, their content
    groups (:func:`~mispair.data.content.fold_groups`) dealt (``seed``) into groups of about
    ``group_images`` images, the size of a training fold, so that a ``contrast`` score weighs a pair
    against as many other images as a held-out training pair; and each pair's content group."""
    n_images = others.pairs.n_images
    groups = max(1, round(n_images / max(group_images, 1)))
    content = fold_groups(others.pairs.images, others.tokens, others.image_of_caption, max(groups, 2))
    of_pair = content.of_image[others.image_of_caption]
    if groups == 1:
        return np.zeros(len(others), dtype=np.int64), of_pair
    return content_folds(content, others.image_of_caption, groups, seed), of_pair


def contrast_cells(
    content: ContentGroups, train: TrainingPairs, fold: np.ndarray, seeds: list[int], folds: int
) -> np.ndarray:
    """``[repeats, n_pairs]``: the contrast group (:func:`contrast_groups`) of every pair within the
    fold that holds it out, in each repeat: with the folds, where a decoy's two sides must lie
    together (:mod:`mispair.engine.held_out.decoys`)."""
    group = np.zeros_like(fold)
    for repeat, seed in enumerate(seeds):
        for k in range(folds):
            held_out = np.flatnonzero(fold[repeat] == k)
            group[repeat, held_out] = contrast_groups(
                content, train.subset(held_out), scorer_seed(seed, k, folds)
            )
    return group


def sampled(pairs: np.ndarray, most: int | None, seed: int) -> np.ndarray:
    """``pairs`` (sorted indices), or a random sample of ``most`` of them (seeded, sorted) when
    there are more (``division.scorer_pairs``)."""
    if most is None or len(pairs) <= most:
        return pairs
    return np.sort(np.random.default_rng(seed).choice(pairs, size=most, replace=False))


def contrast_groups(content: ContentGroups, held: TrainingPairs, seed: int) -> np.ndarray:
    """``[len(held)]`` group of each held-out pair for its ``contrast`` score: one group when the
    fold has at most :data:`CONTRAST_IMAGES` images, else its content groups dealt (``seed``) into
    groups of about that many images."""
    groups = -(-len(np.unique(held.image_of_caption)) // CONTRAST_IMAGES)
    if groups == 1:
        return np.zeros(len(held), dtype=np.int64)
    return content_folds(content, held.image_of_caption, groups, seed)


def grouped_scores(
    score: Callable[[TrainingPairs, np.ndarray], tuple[np.ndarray, np.ndarray]],
    pairs: TrainingPairs,
    group: np.ndarray,
    decoys: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``([len(pairs)], [len(decoys)])``: ``score`` of each group of ``pairs`` (``group
    [len(pairs)]``) on its own, with the ``decoys [m, 2]`` (indices into ``pairs``, both sides of
    each in one group) of that group."""
    out = np.zeros(len(pairs), dtype=np.float32)
    out_decoys = np.zeros(len(decoys), dtype=np.float32)
    for g in np.unique(group):
        members = np.flatnonzero(group == g)
        rows, local = local_decoys(decoys, members, len(pairs))
        out[members], out_decoys[rows] = score(pairs.subset(members), local)
    return out, out_decoys

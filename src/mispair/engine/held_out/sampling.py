"""How the held-out pairs are dealt, once per scoring (:func:`deal_pairs`, every round deals the
same): folds by content, contrast groups within a fold, the cells decoys are drawn in, the groups
of the other splits; and a scorer's sample of training pairs. Every seed comes from the scoring's
:class:`~mispair.engine.held_out.plan.HeldOutSeeds`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mispair.data.batching import TrainingPairs
from mispair.data.content import ContentGroups, content_folds, fold_groups
from mispair.engine.held_out.decoys import DECOYS_PER_PAIR, cells_of, decoy_pairs, local_decoys
from mispair.engine.held_out.kinds import SCORE_KINDS
from mispair.engine.held_out.plan import HeldOutScoring, HeldOutSeeds

CONTRAST_IMAGES = 4096
"""The most images a ``contrast`` score weighs a pair against: a larger fold is scored in content
groups of about this many images (:func:`contrast_groups`), so the score's cost grows linearly
with the collection, not with the square of a fold (Tux Paint's and OpenClipart's folds, 150 and
1,080 images, are scored whole)."""

FOLDS_BY = "content"
"""How the folds are dealt (part of the cache key: scores kept from folds dealt by image index
before are computed again)."""

NO_DECOYS = np.zeros((0, 2), dtype=np.int64)


@dataclass(frozen=True)
class DealtPairs:
    """How a scoring's pairs are dealt: the training pairs' images' ``content`` groups, ``fold
    [repeats, n_pairs]`` the fold that holds each pair out in each repeat, and their ``decoys [m,
    2]``; the ``others`` (the other splits), their contrast ``group [n_others]`` and their decoys."""

    content: ContentGroups
    fold: np.ndarray
    decoys: np.ndarray
    others: TrainingPairs | None = None
    group: np.ndarray | None = None
    other_decoys: np.ndarray = field(default_factory=lambda: NO_DECOYS)

    @property
    def n_others(self) -> int:
        return 0 if self.others is None else len(self.others)


def deal_pairs(
    scoring: HeldOutScoring, train: TrainingPairs, others: TrainingPairs | None, train_images: int
) -> DealtPairs:
    """``train`` dealt into ``scoring.plan``'s folds by content, one partition per repeat, with
    their decoys where the score kind has them; ``others`` (or None) into groups of a fold of
    ``train_images`` images, with theirs."""
    plan, seeds = scoring.plan, scoring.seeds
    if plan.repeats < 1:
        raise ValueError(f"out-of-fold scoring needs at least 1 repeat, got {plan.repeats}")
    with_decoys = SCORE_KINDS[plan.score_kind].decoys
    content = fold_groups(train.pairs.images, train.tokens, train.image_of_caption, plan.folds)
    fold = np.stack([content_folds(content, train.image_of_caption, plan.folds, s) for s in seeds.repeats])
    decoys = _training_decoys(content, train, fold, seeds) if with_decoys else NO_DECOYS
    if others is None:
        return DealtPairs(content, fold, decoys)
    group_images = other_group_images(train_images, plan.folds)
    group, other_content = other_groups(others, group_images, seeds.other_groups)
    other_decoys = NO_DECOYS
    if with_decoys:
        other_decoys = decoy_pairs(group, other_content, DECOYS_PER_PAIR, seeds.other_decoys)
    return DealtPairs(content, fold, decoys, others, group, other_decoys)


def _training_decoys(
    content: ContentGroups, train: TrainingPairs, fold: np.ndarray, seeds: HeldOutSeeds
) -> np.ndarray:
    """``[m, 2]``: the training pairs' decoys, each within its cell
    (:mod:`~mispair.engine.held_out.decoys`)."""
    held_together = np.concatenate([fold, contrast_cells(content, train, fold, seeds)])
    group = content.of_image[train.image_of_caption]
    return decoy_pairs(cells_of(held_together), group, DECOYS_PER_PAIR, seeds.decoys)


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
    content: ContentGroups, train: TrainingPairs, fold: np.ndarray, seeds: HeldOutSeeds
) -> np.ndarray:
    """``[repeats, n_pairs]``: the contrast group (:func:`contrast_groups`) of every pair within the
    fold that holds it out, in each repeat (its scorer's seed): with the folds, where a decoy's two
    sides must lie together (:mod:`mispair.engine.held_out.decoys`)."""
    group = np.zeros_like(fold)
    for repeat, scorer_seeds in enumerate(seeds.scorers):
        for k, seed in enumerate(scorer_seeds):
            held_out = np.flatnonzero(fold[repeat] == k)
            group[repeat, held_out] = contrast_groups(content, train.subset(held_out), seed)
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

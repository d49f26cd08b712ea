"""Every training pair of a trained run, ranked by suspicion, with suggested fixes."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from mispair.audit.nearest import (
    BLOCK,
    COUNT_DEPTH,
    EXACT_PRODUCTS,
    ImageMatcher,
    ItemIndex,
    index_for,
    paired_inner,
    training_sample,
)
from mispair.data.batching import TrainingPairs
from mispair.division import Division
from mispair.division.scores import AUDIT_MIXTURE, held_out_mixture
from mispair.encoding import cross_similarities, pair_similarities
from mispair.engine.trained import TrainedRun
from mispair.progress import progress_bar
from mispair.search.model import SearchModel

SUGGESTIONS = 3
"""Suggested captions per image and images per caption."""


@dataclass
class BestMatches:
    """The collection's best matches of each image and caption under a model (suggested fixes).

    ``captions [n_images, k]``/``caption_scores``: each image's ``k`` most similar captions
    (indices, best first) and their similarities; ``images [n_captions, k]``/``image_scores``:
    each caption's ``k`` most similar images; ``pair_score [n_captions]``: each caption's
    similarity with its paired image; ``better_images [n_captions]``: how many other images are
    more similar to the caption than its paired image. ``k`` is one more than the suggestions
    shown, so that a pair's own caption or image can be left out (:func:`others`); where the
    collection has fewer, the rest is index −1 with score NaN. ``suspects_only``: the captions
    were chosen among the suspected pairs' (:func:`suggestion_pools`). ``better_cap``: None where
    the search was exact; else the matches came from an IVF index
    (:func:`~mispair.audit.nearest.index_for`) and ``better_images`` counts at most this many (a
    count at the cap means "at least").
    """

    captions: np.ndarray
    caption_scores: np.ndarray
    images: np.ndarray
    image_scores: np.ndarray
    pair_score: np.ndarray
    better_images: np.ndarray
    suspects_only: bool = False
    better_cap: int | None = None


def best_matches(
    run: TrainedRun,
    *,
    pairs: TrainingPairs | None = None,
    suspected: np.ndarray | None = None,
    chunk: int = 1024,
    progress: bool = False,
    search: Literal["auto", "faiss", "brute"] = "auto",
) -> BestMatches:
    """:class:`BestMatches` of ``pairs`` (default: the run's training pairs) under the run's models
    (averaged). With ``suspected [n_captions]`` (bool), the suggestions are drawn from the
    suspected pairs (:func:`suggestion_pools`).

    ``search``: ``faiss`` encodes every image and caption once and finds the best matches through
    FAISS inner-product indexes (:func:`vector_matches`: exact up to
    :data:`~mispair.audit.nearest.EXACT_PRODUCTS`; cosine head only, where the index vectors'
    inner product is the head's score; memory linear in the images and the pool's captions);
    ``brute`` reads the ``[n_images, n_captions]`` similarities of the head ``chunk`` images at a
    time (memory: chunk × captions; every caption encoded again per chunk), the reference;
    ``auto``: ``faiss`` where it applies and FAISS is installed.
    """
    train: TrainingPairs = run.train if pairs is None else pairs
    pools = (None, None)
    if suspected is not None:
        pools = suggestion_pools(suspected, train.image_of_caption, train.pairs.n_images)
    if search == "auto":
        search = "faiss" if faiss_applies(run) else "brute"
    if search == "faiss":
        matches = vector_matches(run, train, *pools, progress=progress)
    else:
        matches = brute_matches(run, train, *pools, chunk=chunk, progress=progress)
    matches.suspects_only = pools[0] is not None
    return matches


def faiss_applies(run: TrainedRun) -> bool:
    """True when :func:`vector_matches` gives the head's best matches: a head whose similarity an
    inner-product index reproduces (``vector_search``, e.g. ``cosine``), FAISS installed."""
    searchable = all(getattr(model.similarity, "vector_search", False) for model in run.models)
    return searchable and importlib.util.find_spec("faiss") is not None


def vector_matches(
    run: TrainedRun,
    train: TrainingPairs,
    captions_pool: np.ndarray | None = None,
    images_pool: np.ndarray | None = None,
    *,
    k: int = SUGGESTIONS + 1,
    exact_up_to: int = EXACT_PRODUCTS,
    progress: bool = False,
) -> BestMatches:
    """:class:`BestMatches` of ``train`` from each image's and caption's index vector
    (:class:`~mispair.search.model.SearchModel`) through FAISS indexes, exact up to
    ``exact_up_to`` products (:mod:`mispair.audit.nearest`); the pools as in :func:`matches_of`.

    The images' vectors are indexed once (:class:`~mispair.audit.nearest.ImageMatcher`, which
    above the exact limit keeps their only copy); the captions' are made
    :data:`~mispair.audit.nearest.BLOCK` at a time, matched to the images, and those of the pool
    added to the captions' index, which the images then search a block at a time: the memory is
    that of the images and of the pool's captions, not of every caption.
    """
    model = SearchModel(run)
    n_captions, paired = len(train), train.image_of_caption
    matcher = ImageMatcher.of(
        model.image_vectors(train.pairs, progress=progress), n_captions, k, images_pool, exact_up_to
    )
    n_images = matcher.n_images
    pool = np.arange(n_captions) if captions_pool is None else np.flatnonzero(captions_pool)
    spec = index_for(len(pool), n_images, exact_up_to)
    sample = training_sample(pool, spec)
    captions = ItemIndex(spec, model.text_vectors([train.tokens[c] for c in sample]), len(pool))
    best_images = np.full((n_captions, k), -1, dtype=np.int64)
    image_scores = np.full((n_captions, k), np.nan, dtype=np.float32)
    pair_score = np.zeros(n_captions, dtype=np.float32)
    better = np.zeros(n_captions, dtype=np.int64)
    starts = range(0, n_captions, BLOCK)
    for start in progress_bar(starts, desc="best matches", unit="block", disable=not progress, leave=False):
        rows = slice(start, min(start + BLOCK, n_captions))
        vectors = model.text_vectors(train.tokens[rows])
        pair_score[rows] = paired_inner(matcher.vectors, vectors, paired[rows])
        best_images[rows], image_scores[rows], better[rows] = matcher.match(
            vectors, paired[rows], pair_score[rows]
        )
        chosen = pool[(pool >= rows.start) & (pool < rows.stop)]
        captions.add(vectors[chosen - start], chosen)
    best_captions = np.full((n_images, k), -1, dtype=np.int64)
    caption_scores = np.full((n_images, k), np.nan, dtype=np.float32)
    for start in range(0, n_images, BLOCK):
        block = np.arange(start, min(start + BLOCK, n_images))
        best_captions[block], caption_scores[block] = captions.search(matcher.vectors(block), k)
    cap = None if matcher.exact else COUNT_DEPTH
    return BestMatches(
        best_captions, caption_scores, best_images, image_scores, pair_score, better, better_cap=cap
    )


def brute_matches(
    run: TrainedRun,
    train: TrainingPairs,
    captions_pool: np.ndarray | None = None,
    images_pool: np.ndarray | None = None,
    *,
    chunk: int = 1024,
    progress: bool = False,
) -> BestMatches:
    """:class:`BestMatches` of ``train`` from the head's similarities, ``chunk`` images against
    every caption at a time (:func:`matches_of`)."""
    captions, batch_size = np.arange(len(train)), run.config.train.eval_batch_size
    paired = pair_similarities(run.models, train, batch_size, run.device)

    def similarities(images: np.ndarray) -> np.ndarray:
        return cross_similarities(
            run.models, train, images, captions, batch_size=batch_size, device=run.device
        ).numpy()

    return matches_of(
        similarities,
        train.pairs.n_images,
        train.image_of_caption,
        paired,
        chunk=chunk,
        captions_pool=captions_pool,
        images_pool=images_pool,
        progress=progress,
    )


def suggestion_pools(
    suspected: np.ndarray, image_of_caption: np.ndarray, n_images: int, k: int = SUGGESTIONS + 1
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(captions [n_captions], images [n_images])``: the captions and images suggestions are
    drawn from, the suspected pairs' (None: all, where fewer than ``k`` are suspected). A swapped
    pair's true caption sits on another mismatched pair, so leaving out the captions that fit
    their own images well finds it more often: on Tux Paint with 40% planted swaps, the true
    caption is among the 3 suggestions for 22% of the swapped pairs instead of 9%
    (``benchmarks/audit_quality.py``)."""
    suspected = np.asarray(suspected, dtype=bool)
    images = np.zeros(n_images, dtype=bool)
    images[image_of_caption[suspected]] = True
    return (suspected if suspected.sum() >= k else None), (images if images.sum() >= k else None)


def matches_of(
    similarities: Callable[[np.ndarray], np.ndarray],
    n_images: int,
    image_of_caption: np.ndarray,
    paired: np.ndarray,
    *,
    chunk: int = 1024,
    k: int = SUGGESTIONS + 1,
    captions_pool: np.ndarray | None = None,
    images_pool: np.ndarray | None = None,
    progress: bool = False,
) -> BestMatches:
    """:class:`BestMatches` from ``similarities(images) -> [len(images), n_captions]`` read
    ``chunk`` images at a time; ``paired [n_captions]``: each caption's similarity with its image
    (what ``better_images`` counts against, over every image). ``captions_pool [n_captions]`` and
    ``images_pool [n_images]`` (bool, at least ``k`` True; None: all) are the captions and images
    the best matches are chosen from."""
    n_captions = len(image_of_caption)
    captions = np.full((n_images, k), -1, dtype=np.int64)
    caption_scores = np.full((n_images, k), np.nan, dtype=np.float32)
    images = np.full((n_captions, k), -1, dtype=np.int64)
    image_scores = np.full((n_captions, k), -np.inf, dtype=np.float32)
    pair_score = np.zeros(n_captions, dtype=np.float32)
    better = np.zeros(n_captions, dtype=np.int64)
    columns = np.arange(n_captions)
    starts = range(0, n_images, chunk)
    for start in progress_bar(starts, desc="suggestions", disable=not progress, leave=False):
        rows = np.arange(start, min(start + chunk, n_images))
        sims = similarities(rows)
        pooled = sims if captions_pool is None else np.where(captions_pool[None, :], sims, -np.inf)
        top = _top(pooled, k, axis=1)
        captions[rows, : top.shape[1]] = top
        caption_scores[rows, : top.shape[1]] = np.take_along_axis(pooled, top, axis=1)
        pooled = sims if images_pool is None else np.where(images_pool[rows, None], sims, -np.inf)
        down = _top(pooled, k, axis=0).T  # [n_captions, ≤ k] rows of this chunk
        down_scores = np.take_along_axis(pooled.T, down, axis=1)
        images, image_scores = _merge(images, image_scores, rows[down], down_scores, k)
        mine = (image_of_caption >= start) & (image_of_caption <= rows[-1])
        pair_score[mine] = sims[image_of_caption[mine] - start, columns[mine]]
        greater = sims > paired[None, :]
        greater[image_of_caption[mine] - start, columns[mine]] = False
        better += greater.sum(axis=0)
    image_scores[~np.isfinite(image_scores)] = np.nan
    images[np.isnan(image_scores)] = -1
    captions[~np.isfinite(caption_scores)] = -1
    caption_scores[~np.isfinite(caption_scores)] = np.nan
    return BestMatches(captions, caption_scores, images, image_scores, pair_score, better)


def _top(sims: np.ndarray, k: int, axis: int) -> np.ndarray:
    """The indices of the ``min(k, n)`` largest entries along ``axis``, largest first."""
    k = min(k, sims.shape[axis])
    part = np.argpartition(-sims, k - 1, axis=axis).take(np.arange(k), axis=axis)
    order = np.argsort(-np.take_along_axis(sims, part, axis=axis), axis=axis, kind="stable")
    return np.take_along_axis(part, order, axis=axis)


def _merge(
    best: np.ndarray, scores: np.ndarray, new: np.ndarray, new_scores: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of two ranked candidate lists per row (earlier candidates first on ties)."""
    both, both_scores = np.concatenate([best, new], axis=1), np.concatenate([scores, new_scores], axis=1)
    order = np.argsort(-both_scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(both, order, axis=1), np.take_along_axis(both_scores, order, axis=1)


def others(
    top: np.ndarray, scores: np.ndarray, own: np.ndarray, n: int = SUGGESTIONS
) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` entries of each row of ``top [m, k]`` (with their ``scores``) that are not
    the row's ``own [m]`` index: a pair's suggestions without its own caption or image."""
    keep = np.argsort(top == own[:, None], axis=1, kind="stable")[:, :n]
    return np.take_along_axis(top, keep, axis=1), np.take_along_axis(scores, keep, axis=1)


def suspicion_order(score: np.ndarray) -> np.ndarray:
    """``[n_pairs]`` pair indices from the most suspect (lowest held-out score) to the least;
    ties keep the collection's order."""
    return np.argsort(score, kind="stable")


def score_division(score: np.ndarray) -> Division:
    """The two-component GMM of the audit's held-out scores (what ``holdout`` fits), EM run to
    convergence (the mismatch probabilities and the share are what a user reads; NCR's 10
    iterations stop short): its ``params`` are on the min–max normalised suspicion ``−score``, the
    noisy component second."""
    score = np.asarray(score, dtype=np.float64)
    division = held_out_mixture(score, AUDIT_MIXTURE)
    division.clean_prob = monotone_clean_prob(score, division.clean_prob)
    return division


def monotone_clean_prob(score: np.ndarray, clean_prob: np.ndarray) -> np.ndarray:
    """``clean_prob [N]`` raised to its least majorant that never falls as the score rises: a pair
    is at least as likely clean as any pair it outscores.

    A Gaussian mixture with unequal variances gives the wider (mismatched) component the far tail on
    *both* sides, so the best-scoring pairs of a skewed score came out more suspect than middling
    ones (on 346 icons, 39 inversions; the ranking's AUC fell from 0.88 by score to 0.83 by mismatch
    probability). ``clean_prob`` is unchanged where it was already monotone.
    """
    order = np.argsort(score, kind="stable")
    ascending = score[order]
    running_max = np.maximum.accumulate(clean_prob[order])
    last_of_tie = np.searchsorted(ascending, ascending, side="right") - 1  # equal scores, equal values
    monotone = np.empty_like(clean_prob)
    monotone[order] = running_max[last_of_tie]
    return monotone

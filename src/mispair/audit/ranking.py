"""Every training pair of a trained run, ranked by suspicion, with suggested fixes."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
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

RANK_TILE = 1 << 17
"""Similarities ranked or counted at once by :func:`matches_of` (512 KiB of float32): a tile's
copies (pooled, negated, ranked in int64) stay in the CPU's cache, where a whole chunk's were
4 × its similarities (310 MB of copies of 1,024 images × 20,000 captions)."""


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
    searchable = all(getattr(model.head, "vector_search", False) for model in run.models)
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
    starts = range(0, n_images, chunk)
    for start in progress_bar(starts, desc="suggestions", disable=not progress, leave=False):
        rows = np.arange(start, min(start + chunk, n_images))
        sims = similarities(rows)
        top, top_scores = _tiled_top(sims, k, 1, None if captions_pool is None else captions_pool[None, :])
        captions[rows, : top.shape[1]], caption_scores[rows, : top.shape[1]] = top, top_scores
        down, down_scores = _tiled_top(sims, k, 0, None if images_pool is None else images_pool[rows, None])
        images, image_scores = _merge(images, image_scores, rows[down.T], down_scores.T, k)
        mine = np.flatnonzero((image_of_caption >= start) & (image_of_caption <= rows[-1]))
        pair_score[mine] = sims[image_of_caption[mine] - start, mine]
        better += _count_greater(sims, paired)
        better[mine] -= pair_score[mine] > paired[mine]  # a caption's own image is not counted
        del sims  # before the next chunk's are made
    image_scores[~np.isfinite(image_scores)] = np.nan
    images[np.isnan(image_scores)] = -1
    captions[~np.isfinite(caption_scores)] = -1
    caption_scores[~np.isfinite(caption_scores)] = np.nan
    return BestMatches(captions, caption_scores, images, image_scores, pair_score, better)


def _tiled_top(
    sims: np.ndarray, k: int, axis: int, keep: np.ndarray | None = None, tile: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, scores)``: :func:`_top` of ``sims [m, n]`` along ``axis`` and the entries it
    picks, ``keep`` (bool, broadcast to ``sims``; None: all) the entries it may pick (the others
    read as −inf), ranked a tile of about ``tile`` entries (default :data:`RANK_TILE`; whole rows
    for ``axis`` 1, whole columns for 0) at a time: each row's or column's ranking is the one of
    the whole matrix, ties included, and the memory one tile's copies, not three of ``sims`` and
    its ``[m, n]`` int64 ranking."""
    across = 1 - axis
    step = max(1, (tile or RANK_TILE) // max(1, sims.shape[axis]))
    shape = list(sims.shape)
    shape[axis] = min(k, sims.shape[axis])
    top, scores = np.empty(shape, dtype=np.intp), np.empty(shape, dtype=sims.dtype)
    allowed = None if keep is None else np.broadcast_to(keep, sims.shape)
    for start in range(0, sims.shape[across], step):
        part = (slice(None), slice(start, start + step)) if axis == 0 else slice(start, start + step)
        block = sims[part] if allowed is None else np.where(allowed[part], sims[part], -np.inf)
        top[part] = _top(block, k, axis)
        scores[part] = np.take_along_axis(block, top[part], axis=axis)
    return top, scores


def _count_greater(sims: np.ndarray, threshold: np.ndarray, tile: int | None = None) -> np.ndarray:
    """``[n]`` int64: how many entries of each column of ``sims [m, n]`` exceed its ``threshold
    [n]``, a tile of about ``tile`` entries (default :data:`RANK_TILE`) at a time."""
    counts = np.empty(sims.shape[1], dtype=np.int64)
    step = max(1, (tile or RANK_TILE) // max(1, sims.shape[0]))
    for start in range(0, sims.shape[1], step):
        columns = slice(start, start + step)
        counts[columns] = (sims[:, columns] > threshold[None, columns]).sum(axis=0)
    return counts


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


def suspicion_order(score: np.ndarray, mismatch: np.ndarray, pair_ids: Sequence[str]) -> np.ndarray:
    """``[n_pairs]`` pair indices from the most suspect to the least: by mismatch probability
    (highest first), ties by held-out score (lowest first), then by pair id.

    The probability leads because it is what a reviewer reads: each split's scores are calibrated
    apart, so ordered by the raw score a pair shown 1.00 could sit below pairs shown 0.84. Within a
    split the probability never falls as the score rises, so there the order is the score's."""
    score, mismatch = np.asarray(score), np.asarray(mismatch)
    order = np.lexsort((score, -mismatch))
    tied = (np.diff(score[order]) == 0) & (np.diff(mismatch[order]) == 0)
    starts = np.flatnonzero(tied & ~np.r_[False, tied[:-1]])  # runs of equal (probability, score)
    ends = np.flatnonzero(tied & ~np.r_[tied[1:], False]) + 2
    for start, end in zip(starts, ends):  # few: only pairs of equal scores tie
        order[start:end] = sorted(order[start:end], key=lambda k: pair_ids[k])
    return order


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

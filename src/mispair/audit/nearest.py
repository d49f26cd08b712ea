"""Best matches from index vectors, without the all-pairs matrix: each query's ``k`` highest inner
products through an exact FAISS index (:func:`~mispair.search.backend.build_ann`, ``flat``), and
how many items score above a threshold, a block of queries at a time.

The vectors are :class:`~mispair.search.model.SearchModel`'s: their inner product is the models'
mean cosine similarity, what the cosine head scores, so the results equal the brute-force
search over the head's similarities (:func:`mispair.audit.ranking.matches_of`) up to float
rounding. Memory is linear in the collection: the index holds the vectors, a search returns
``k`` per query, a count holds one ``[block, n_items]`` tile.
"""

from __future__ import annotations

import numpy as np

from mispair.search.backend import IndexSpec, build_ann, search_ann

TILE = 1 << 22
"""Similarities held at once by :func:`count_above` (16 MiB of float32)."""


def top_inner(
    items: np.ndarray, queries: np.ndarray, k: int, pool: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(ids [n_queries, k], scores [n_queries, k])``: each query's ``k`` items of highest inner
    product, best first, among ``items [n_items, d]`` (``pool [n_items]`` bool: among those only;
    None: all); where fewer than ``k`` are in the pool, the rest is id −1 with score NaN."""
    chosen = np.arange(len(items)) if pool is None else np.flatnonzero(pool)
    ids = np.full((len(queries), k), -1, dtype=np.int64)
    scores = np.full((len(queries), k), np.nan, dtype=np.float32)
    if len(chosen) == 0 or len(queries) == 0:
        return ids, scores
    spec = IndexSpec(kind="flat")
    found_scores, found = search_ann(build_ann(items[chosen], spec), queries, k, spec)
    width = found.shape[1]
    ids[:, :width] = np.where(found >= 0, chosen[np.maximum(found, 0)], -1)
    scores[:, :width] = np.where(found >= 0, found_scores, np.nan)
    return ids, scores


def paired_inner(images: np.ndarray, captions: np.ndarray, image_of_caption: np.ndarray) -> np.ndarray:
    """``[n_captions]`` float32 inner product of each caption's vector with its image's."""
    out = np.empty(len(captions), dtype=np.float32)
    block = max(1, TILE // max(1, captions.shape[1]))
    for start in range(0, len(captions), block):
        rows = slice(start, start + block)
        out[rows] = np.einsum("nd,nd->n", captions[rows], images[image_of_caption[rows]])
    return out


def count_above(
    items: np.ndarray, queries: np.ndarray, threshold: np.ndarray, exclude: np.ndarray
) -> np.ndarray:
    """``[n_queries]`` int64: how many ``items [n_items, d]`` have an inner product with each
    query above its ``threshold [n_queries]``, not counting the item ``exclude [n_queries]``;
    ``TILE`` similarities at a time."""
    counts = np.zeros(len(queries), dtype=np.int64)
    block = max(1, TILE // max(1, len(items)))
    for start in range(0, len(queries), block):
        rows = np.arange(start, min(start + block, len(queries)))
        above = queries[rows] @ items.T > threshold[rows, None]
        above[np.arange(len(rows)), exclude[rows]] = False
        counts[rows] = above.sum(axis=1)
    return counts

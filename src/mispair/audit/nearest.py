"""Best matches from index vectors, without the all-pairs matrix: each query's ``k`` highest inner
products through a FAISS index (:func:`~mispair.ann.build_ann`), and how many items score above
a threshold, a block of queries at a time.

Up to :data:`EXACT_PRODUCTS` query–item products (100,000 pairs of 20,000 images: 2·10⁹) the
index is exact (``flat``) and the counts are exact. Above, the all-pairs products grow as the
square of the collection (a million pairs: 2·10¹¹, about 100× the time of 100,000), so the index
is an IVF of ``√n`` cells searched in :data:`PROBE` of them (:func:`index_for`): the best matches
are those found there, and a count is that of the :data:`COUNT_DEPTH` best items found, capped
there (a count at the cap means "at least").

The vectors are :class:`~mispair.search.model.SearchModel`'s: their inner product is the models'
mean cosine similarity, what the cosine head scores, so the results equal the brute-force
search over the head's similarities (:func:`mispair.audit.ranking.matches_of`) up to float
rounding. Memory is linear in the collection: the index holds the vectors, a search returns
``k`` per query, a count holds one ``[block, n_items]`` tile.
"""

from __future__ import annotations

import numpy as np

from mispair.ann import IndexSpec, build_ann, search_ann

TILE = 1 << 22
"""Similarities held at once by :func:`count_above` (16 MiB of float32)."""

EXACT_PRODUCTS = 4 * 10**9
"""Up to this many query–item products, best matches and counts are exact (module docstring)."""

PROBE = 16
"""The IVF cells a query visits above :data:`EXACT_PRODUCTS`."""

COUNT_DEPTH = 100
"""Above :data:`EXACT_PRODUCTS`, :func:`count_above` counts among this many best items found."""


def index_for(n_items: int, n_queries: int, exact_up_to: int = EXACT_PRODUCTS) -> IndexSpec:
    """The index :func:`top_inner` and :func:`count_above` search: ``flat`` (exact) up to
    ``exact_up_to`` products, else an IVF of ``√n_items`` cells searched in :data:`PROBE`."""
    if n_items * n_queries <= exact_up_to:
        return IndexSpec(kind="flat")
    return IndexSpec(kind="ivf", nlist=max(1, round(n_items**0.5)), nprobe=PROBE)


def top_inner(
    items: np.ndarray,
    queries: np.ndarray,
    k: int,
    pool: np.ndarray | None = None,
    exact_up_to: int = EXACT_PRODUCTS,
) -> tuple[np.ndarray, np.ndarray]:
    """``(ids [n_queries, k], scores [n_queries, k])``: each query's ``k`` items of highest inner
    product, best first, among ``items [n_items, d]`` (``pool [n_items]`` bool: among those only;
    None: all) through the index :func:`index_for` names; where fewer than ``k`` are in the pool
    (or found), the rest is id −1 with score NaN."""
    chosen = np.arange(len(items)) if pool is None else np.flatnonzero(pool)
    ids = np.full((len(queries), k), -1, dtype=np.int64)
    scores = np.full((len(queries), k), np.nan, dtype=np.float32)
    if len(chosen) == 0 or len(queries) == 0:
        return ids, scores
    spec = index_for(len(chosen), len(queries), exact_up_to)
    index = build_ann(items[chosen], spec, points_per_cell=64)
    found_scores, found = search_ann(index, queries, k, spec)
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
    items: np.ndarray,
    queries: np.ndarray,
    threshold: np.ndarray,
    exclude: np.ndarray,
    exact_up_to: int = EXACT_PRODUCTS,
) -> np.ndarray:
    """``[n_queries]`` int64: how many ``items [n_items, d]`` have an inner product with each
    query above its ``threshold [n_queries]``, not counting the item ``exclude [n_queries]``:
    exact up to ``exact_up_to`` products, ``TILE`` similarities at a time; above, among the
    :data:`COUNT_DEPTH` best items an IVF index finds, at most :data:`COUNT_DEPTH` (the module
    docstring)."""
    spec = index_for(len(items), len(queries), exact_up_to)
    if spec.kind != "flat":
        found_scores, found = search_ann(
            build_ann(items, spec, points_per_cell=64), queries, COUNT_DEPTH + 1, spec
        )
        above = (found >= 0) & (found != exclude[:, None]) & (found_scores > threshold[:, None])
        return np.minimum(above.sum(axis=1), COUNT_DEPTH).astype(np.int64)
    counts = np.zeros(len(queries), dtype=np.int64)
    block = max(1, TILE // max(1, len(items)))
    for start in range(0, len(queries), block):
        rows = np.arange(start, min(start + block, len(queries)))
        above = queries[rows] @ items.T > threshold[rows, None]
        above[np.arange(len(rows)), exclude[rows]] = False
        counts[rows] = above.sum(axis=1)
    return counts

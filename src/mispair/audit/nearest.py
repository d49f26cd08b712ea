"""Best matches from index vectors, without the all-pairs matrix: each query's ``k`` highest inner
products through a FAISS index (:class:`ItemIndex`), and how many items score above a threshold,
a block of queries at a time.

Up to :data:`EXACT_PRODUCTS` query–item products (100,000 pairs of 20,000 images: 2·10⁹) the
index is exact (``flat``) and the counts are exact. Above, the all-pairs products grow as the
square of the collection (a million pairs: 2·10¹¹, about 100× the time of 100,000), so the index
is an IVF of ``√n`` cells searched in :data:`PROBE` of them (:func:`index_for`): the best matches
are those found there, and a count is that of the :data:`COUNT_DEPTH` best items found, capped
there (a count at the cap means "at least"). One search of the images to that depth gives a
caption both its count and its best images (:class:`ImageMatcher`).

The vectors are :class:`~mispair.search.model.SearchModel`'s: their inner product is the models'
mean cosine similarity, what the cosine head scores, so the results equal the brute-force
search over the head's similarities (:func:`mispair.audit.ranking.matches_of`) up to float
rounding. Memory is linear in what is indexed: an index is filled :data:`BLOCK` vectors at a time
(no copy of them all), the captions are matched a block at a time, a search returns ``k`` per
query, a count holds one ``[block, n_items]`` tile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mispair.ann import IndexSpec, empty_ann, search_ann

TILE = 1 << 22
"""Similarities held at once by :func:`count_above` (16 MiB of float32)."""

EXACT_PRODUCTS = 4 * 10**9
"""Up to this many query–item products, best matches and counts are exact (module docstring)."""

PROBE = 16
"""The IVF cells a query visits above :data:`EXACT_PRODUCTS`."""

COUNT_DEPTH = 100
"""Above :data:`EXACT_PRODUCTS`, a count is among this many best items found (:func:`capped_count`)."""

POINTS_PER_CELL = 64
"""The vectors an IVF's cells are trained on, per cell (:func:`training_sample`)."""

BLOCK = 65_536
"""Items added to an index, or captions matched, at a time (a block of 512-long vectors: 128 MiB)."""


def index_for(n_items: int, n_queries: int, exact_up_to: int = EXACT_PRODUCTS) -> IndexSpec:
    """The index of ``n_items`` searched by ``n_queries``: ``flat`` (exact) up to ``exact_up_to``
    products, else an IVF of ``√n_items`` cells searched in :data:`PROBE`."""
    if n_items * n_queries <= exact_up_to:
        return IndexSpec(kind="flat")
    return IndexSpec(kind="ivf", nlist=max(1, round(n_items**0.5)), nprobe=PROBE)


class ItemIndex:
    """An inner-product index of items with ids (ascending int64: the rows of the collection they
    are), added a block at a time so that no copy of them all is made; :meth:`search` answers in
    those ids.

    ``spec`` from :func:`index_for`; ``sample [m, d]``: vectors like the items (an IVF's cells
    are trained on them; a flat index reads only their width); ``n_items``: how many will be added.
    """

    def __init__(self, spec: IndexSpec, sample: np.ndarray, n_items: int) -> None:
        self.spec = spec
        self.index = empty_ann(spec, sample, n_items, points_per_cell=POINTS_PER_CELL)
        self._ids: list[np.ndarray] = []

    @classmethod
    def of(cls, items: np.ndarray, ids: np.ndarray, spec: IndexSpec) -> ItemIndex:
        """The index of the rows ``ids`` of ``items [n, d]``, read :data:`BLOCK` rows at a time."""
        index = cls(spec, items[training_sample(ids, spec)], len(ids))
        for start in range(0, len(ids), BLOCK):
            chosen = ids[start : start + BLOCK]
            index.add(items[chosen], chosen)
        return index

    def add(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        """Add ``vectors [b, d]``, the items ``ids [b]`` (above every id added before)."""
        if len(ids):
            self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))
            self._ids.append(np.asarray(ids, dtype=np.int64))

    @property
    def ids(self) -> np.ndarray:
        """``[n]`` the ids of the items added, in order."""
        return np.concatenate(self._ids) if self._ids else np.zeros(0, dtype=np.int64)

    def search(
        self, queries: np.ndarray, k: int, among: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(ids [n_queries, k], scores [n_queries, k])``: each query's ``k`` items of highest
        inner product, best first (``among``: of those ids only); where fewer than ``k`` are there
        (or found), the rest is id −1 with score NaN."""
        ids = np.full((len(queries), k), -1, dtype=np.int64)
        scores = np.full((len(queries), k), np.nan, dtype=np.float32)
        added = self.ids
        if len(added) == 0 or len(queries) == 0:
            return ids, scores
        positions = None if among is None else np.searchsorted(added, among)
        found_scores, found = search_ann(self.index, queries, k, self.spec, among=positions)
        width = found.shape[1]
        ids[:, :width] = np.where(found >= 0, added[np.maximum(found, 0)], -1)
        scores[:, :width] = np.where(found >= 0, found_scores, np.nan)
        return ids, scores


def training_sample(ids: np.ndarray, spec: IndexSpec, seed: int = 0) -> np.ndarray:
    """The ids (ascending) whose vectors train an IVF's cells: :data:`POINTS_PER_CELL` a cell at
    most, drawn with ``seed``; one id for a flat index (its width)."""
    if spec.kind == "flat" or len(ids) == 0:
        return ids[:1]
    size = min(len(ids), POINTS_PER_CELL * spec.cells(len(ids)))
    return np.sort(np.random.default_rng(seed).choice(ids, size, replace=False))


@dataclass
class ImageMatcher:
    """Each caption's best images and how many images it fits better than its own, from one index
    of every image, searched a block of captions at a time (:meth:`match`).

    Exact up to ``exact_up_to`` products (a flat index of the pool's images; the counts in tiles,
    :func:`count_above`, over ``images``, held). Above, an IVF of every image (:func:`index_for`)
    is searched once to depth :data:`COUNT_DEPTH` + 1: the counts are those found (capped), and
    the best images the first ``k`` of the pool found there, which are the ``k`` best of the
    pool in the cells visited; a caption with fewer than ``k`` of the pool there is searched
    again among the pool only. The IVF keeps the only copy of the vectors (``images`` None):
    :meth:`vectors` reads them back from it, exactly (400 MB fewer at a million pairs).
    """

    images: np.ndarray | None
    pool: np.ndarray | None
    index: ItemIndex
    k: int

    @classmethod
    def of(
        cls,
        images: np.ndarray,
        n_captions: int,
        k: int,
        pool: np.ndarray | None = None,
        exact_up_to: int = EXACT_PRODUCTS,
    ) -> ImageMatcher:
        """The matcher of ``images [n_images, d]`` for ``n_captions`` captions, ``k`` best images
        among ``pool [n_images]`` (bool; None: all)."""
        spec = index_for(len(images), n_captions, exact_up_to)
        if spec.kind == "flat":
            indexed = np.arange(len(images)) if pool is None else np.flatnonzero(pool)
            return cls(images, pool, ItemIndex.of(images, indexed, spec), k)
        index = ItemIndex.of(images, np.arange(len(images)), spec)
        index.index.make_direct_map()  # image id → its stored vector, for :meth:`vectors`
        return cls(None, pool, index, k)

    @property
    def exact(self) -> bool:
        return self.index.spec.kind == "flat"

    @property
    def n_images(self) -> int:
        return len(self.images) if self.images is not None else self.index.index.ntotal

    def vectors(self, ids: np.ndarray) -> np.ndarray:
        """``[len(ids), d]`` float32: the vectors of the images ``ids``, as given to :meth:`of`."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.images is not None:
            return np.asarray(self.images[ids], dtype=np.float32)
        return self.index.index.reconstruct_batch(ids)

    def match(
        self, captions: np.ndarray, own: np.ndarray, own_score: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ids [b, k], scores [b, k], better [b])`` of caption vectors ``captions [b, d]`` whose
        images are ``own [b]`` with inner product ``own_score [b]``: the best images, and how many
        other images have a higher inner product (at most :data:`COUNT_DEPTH` unless exact)."""
        if self.exact:
            ids, scores = self.index.search(captions, self.k)
            assert self.images is not None  # held on the exact path
            return ids, scores, count_above(self.images, captions, own_score, own)
        found, found_scores = self.index.search(captions, COUNT_DEPTH + 1)
        better = capped_count(found, found_scores, own_score, own)
        in_pool = found >= 0
        if self.pool is not None:
            in_pool &= self.pool[np.maximum(found, 0)]
        first = np.argsort(~in_pool, axis=1, kind="stable")[:, : self.k]
        kept = np.take_along_axis(in_pool, first, axis=1)
        ids = np.where(kept, np.take_along_axis(found, first, axis=1), -1)
        scores = np.where(kept, np.take_along_axis(found_scores, first, axis=1), np.nan).astype(np.float32)
        short = np.flatnonzero(in_pool.sum(axis=1) < self.k)
        if self.pool is not None and len(short):
            among = np.flatnonzero(self.pool)
            ids[short], scores[short] = self.index.search(captions[short], self.k, among=among)
        return ids, scores, better


def paired_inner(
    images: np.ndarray | Callable[[np.ndarray], np.ndarray],
    captions: np.ndarray,
    image_of_caption: np.ndarray,
) -> np.ndarray:
    """``[n_captions]`` float32 inner product of each caption's vector with its image's: the rows
    of ``images [n_images, d]``, or what ``images(ids)`` returns (e.g. :meth:`ImageMatcher.vectors`),
    :data:`TILE` numbers at a time."""
    vectors_of = images.__getitem__ if isinstance(images, np.ndarray) else images
    out = np.empty(len(captions), dtype=np.float32)
    block = max(1, TILE // max(1, captions.shape[1]))
    for start in range(0, len(captions), block):
        rows = slice(start, start + block)
        out[rows] = np.einsum("nd,nd->n", captions[rows], vectors_of(image_of_caption[rows]))
    return out


def count_above(
    items: np.ndarray, queries: np.ndarray, threshold: np.ndarray, exclude: np.ndarray
) -> np.ndarray:
    """``[n_queries]`` int64: how many ``items [n_items, d]`` have an inner product with each
    query above its ``threshold [n_queries]``, not counting the item ``exclude [n_queries]``;
    exact, :data:`TILE` similarities at a time."""
    counts = np.zeros(len(queries), dtype=np.int64)
    block = max(1, TILE // max(1, len(items)))
    for start in range(0, len(queries), block):
        rows = np.arange(start, min(start + block, len(queries)))
        above = queries[rows] @ items.T > threshold[rows, None]
        above[np.arange(len(rows)), exclude[rows]] = False
        counts[rows] = above.sum(axis=1)
    return counts


def capped_count(
    found: np.ndarray, scores: np.ndarray, threshold: np.ndarray, exclude: np.ndarray
) -> np.ndarray:
    """``[n_queries]`` int64: :func:`count_above` among the items a search found, ``found [n_queries,
    depth]`` with ``scores``, at most :data:`COUNT_DEPTH`."""
    above = (found >= 0) & (found != exclude[:, None]) & (scores > threshold[:, None])
    return np.minimum(above.sum(axis=1), COUNT_DEPTH).astype(np.int64)

"""Pairs grouped by their content, and folds dealt from the groups (not from the row order).

Held-out scoring must not score a pair with a model that trained on the same caption text with
another image, or on the same picture filed under another name: on Tux Paint 20–23% of the
held-out pairs had their exact caption text among their scorer's training pairs when the folds
were dealt by image index. :func:`content_groups` joins into one group the images that share an
identical caption (as tokenised) or whose pooled features nearly duplicate each other (cosine ≥
:data:`NEAR_DUPLICATE_COSINE`, transitively: the connected components of that graph);
:func:`deal_groups` deals the groups into folds in an order drawn from the groups' content and a
seed, so the same collection in another row order gets the same folds.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from mispair.ann import close_pairs, faiss_installed
from mispair.data.mapped import row_blocks, rows
from mispair.errors import DataError

NEAR_DUPLICATE_COSINE = 0.99
"""Two images are near-duplicates at this cosine similarity of their pooled input features."""


def pooled(features: np.ndarray, chunk: int | None = None, *, unit: bool = True) -> np.ndarray:
    """``[n_images, D]`` float32 unit vectors (the plain means with ``unit`` False): ``features
    [n_images, K, D]`` (or ``[n_images, D]``) averaged over fragments, ``chunk`` images at a time
    (default about 64 MiB: a memory-mapped array is never read whole, nor kept resident;
    :func:`~mispair.data.mapped.row_blocks`)."""
    out = np.empty((len(features), features.shape[-1]), dtype=np.float32)
    for block, part in row_blocks(features, chunk, np.float32):
        out[block] = part.mean(axis=1) if part.ndim == 3 else part
    if not unit:
        return out
    lengths = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(lengths, 1e-12)


EXACT_IMAGES = 50_000
"""Up to this many images, :func:`near_duplicate_edges` compares the full vectors of every pair
(``n² D`` products, all vectors in memory); above, it compares short projections first
(:func:`projected_candidates`): the same pairs, with memory linear in ``n × PROJECTED``."""

PROJECTED = 64
"""The principal axes :func:`projected_candidates` projects the pooled vectors onto."""


KNOWN_EDGES = 4
"""The results of :func:`near_duplicate_edges` this process keeps (:class:`KnownEdges`)."""


def near_duplicate_edges(
    features: np.ndarray,
    threshold: float = NEAR_DUPLICATE_COSINE,
    chunk: int = 512,
    *,
    exact_up_to: int = EXACT_IMAGES,
) -> tuple[np.ndarray, np.ndarray]:
    """``(i, j)`` with ``i < j``: every pair of images of ``features [n, K, D]`` (or ``[n, D]``,
    memory-mapped or not) whose pooled features (:func:`pooled`) have cosine similarity ≥
    ``threshold``. Up to ``exact_up_to`` images, the pooled vectors are compared ``chunk`` rows
    against all; above, the pairs close in :data:`PROJECTED` dimensions are found first and then
    checked on their full vectors (:func:`projected_candidates`), the features read a block at a
    time: the same pairs either way.

    Where the first rows of ``features`` are those of an earlier call's (by a digest of their
    bytes: the training split's, when the audit asks again for all its splits joined), that
    call's pairs are kept and only those with a later row are sought (:data:`KNOWN_EDGES`)."""
    known, digests = KnownEdges.find(features, threshold)
    from_row = 0 if known is None else known.rows
    if len(features) <= exact_up_to or features.shape[-1] <= PROJECTED:
        first, second = _pairs_above(pooled(features), threshold, chunk, from_row)
    else:
        first, second = _checked(features, *projected_candidates(features, threshold, from_row), threshold)
    if known is not None:
        first, second = np.concatenate([known.first, first]), np.concatenate([known.second, second])
    KnownEdges.keep(KnownEdges(len(features), digests[len(features)], threshold, first, second))
    return first, second


@dataclass(frozen=True)
class KnownEdges:
    """The near-duplicate pairs ``(first, second)`` at ``threshold`` of ``rows`` images whose
    features have the ``digest``; the process keeps the last :data:`KNOWN_EDGES`."""

    rows: int
    digest: str
    threshold: float
    first: np.ndarray
    second: np.ndarray

    @staticmethod
    def find(features: np.ndarray, threshold: float) -> tuple[KnownEdges | None, dict[int, str]]:
        """The longest kept result whose rows begin ``features`` (None), and the digests of
        ``features``' prefixes read to know (the whole of it among them)."""
        candidates = [e for e in _KNOWN if e.threshold == threshold and e.rows <= len(features)]
        digests = prefix_digests(features, {e.rows for e in candidates} | {len(features)})
        found = [e for e in candidates if digests[e.rows] == e.digest]
        return max(found, key=lambda e: e.rows, default=None), digests

    @staticmethod
    def keep(edges: KnownEdges) -> None:
        same = (edges.rows, edges.digest, edges.threshold)
        _KNOWN[:] = [e for e in _KNOWN if (e.rows, e.digest, e.threshold) != same]
        _KNOWN.append(edges)
        del _KNOWN[:-KNOWN_EDGES]


_KNOWN: list[KnownEdges] = []


def prefix_digests(features: np.ndarray, lengths: set[int]) -> dict[int, str]:
    """``{m: digest}`` of the first ``m`` rows of ``features`` for each ``m`` of ``lengths`` (their
    bytes, dtype and row shape), in one pass a block at a time."""
    digest = hashlib.blake2b(f"{features.dtype.str}{features.shape[1:]}".encode(), digest_size=16)
    out, done = {}, 0
    for stop in sorted(lengths):
        for _, part in row_blocks(features[done:stop]):
            digest.update(np.ascontiguousarray(part).tobytes())
        out[stop], done = digest.hexdigest(), stop
    return out


def _checked(
    features: np.ndarray, first: np.ndarray, second: np.ndarray, threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """The candidate pairs ``(first, second)`` whose full pooled vectors have cosine ≥ ``threshold``
    (their features read a block of pairs at a time)."""
    keep = np.zeros(len(first), dtype=bool)
    step = 1 << 16
    for start in range(0, len(first), step):
        a, b = first[start : start + step], second[start : start + step]
        needed, where = np.unique(np.concatenate([a, b]), return_inverse=True)
        vectors = pooled(rows(features, needed))
        keep[start : start + len(a)] = np.einsum(
            "nd,nd->n", vectors[where[: len(a)]], vectors[where[len(a) :]]
        ) >= np.float32(threshold)
    return first[keep], second[keep]


def projected_candidates(
    features: np.ndarray, threshold: float, from_row: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(i, j)``, ``i < j``, ``j ≥ from_row``: a superset of such pairs of
    :func:`near_duplicate_edges`. For unit vectors, cosine ≥ t exactly when ``|a − b|² ≤ 2(1 −
    t)``, and an orthogonal projection never lengthens a difference, so every such pair is within
    that distance after projecting onto any :data:`PROJECTED` orthonormal axes (here the principal
    axes of a sample: few other pairs come that close). Found by a FAISS range search when FAISS
    is installed, else block by block."""
    axes = principal_axes(features, PROJECTED)
    projected = np.empty((len(features), axes.shape[1]), dtype=np.float32)
    for block, part in row_blocks(features, None, np.float32):
        projected[block] = pooled(part) @ axes
    radius = 2.0 * (1.0 - threshold) + 1e-4  # a margin for float rounding: candidates are checked
    if faiss_installed():
        return close_pairs(projected, radius, from_row=from_row)
    lengths = (projected**2).sum(axis=1)
    return _pairs_where(
        len(projected),
        lambda rows: lengths[rows, None] + lengths[None, :] - 2 * projected[rows] @ projected.T <= radius,
        1024,
        from_row,
    )


def principal_axes(features: np.ndarray, count: int, sample: int = 20_000, seed: int = 0) -> np.ndarray:
    """``[D, count]`` orthonormal: the principal axes of the pooled vectors of a seeded sample of
    at most ``sample`` images of ``features``, read as 20 runs of consecutive rows (rows picked
    one by one across a memory-mapped file fault its neighbouring pages in too: 20,000 rows of
    180,000 made the whole 1 GB file resident)."""
    runs, length = 20, max(1, sample // 20)
    if len(features) <= sample:
        vectors = pooled(features)
    else:
        starts = np.sort(np.random.default_rng(seed).choice(len(features) - length + 1, runs, replace=False))
        vectors = np.concatenate([pooled(rows(features, slice(s, s + length))) for s in starts])
    vectors -= vectors.mean(axis=0)
    _, axes = np.linalg.eigh((vectors.T @ vectors).astype(np.float64))  # D × D, not an SVD's n × D
    return np.ascontiguousarray(axes[:, ::-1][:, :count], dtype=np.float32)


def _pairs_above(
    vectors: np.ndarray, threshold: float, chunk: int, from_row: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(i, j)``, ``i < j``, ``j ≥ from_row``: the pairs of rows of ``vectors`` (unit) with inner
    product ≥ ``threshold``, ``chunk`` rows against all at a time."""
    return _pairs_where(len(vectors), lambda rows: vectors[rows] @ vectors.T >= threshold, chunk, from_row)


def _pairs_where(
    n: int, close: Callable[[slice], np.ndarray], chunk: int, from_row: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(i, j)``, ``i < j``, ``j ≥ from_row``: the pairs where ``close(rows) -> [len(rows), n]``
    (bool, symmetric) holds, ``chunk`` rows ``j`` against all at a time."""
    first, second = [], []
    for start in range(from_row, n, chunk):
        j, i = np.nonzero(close(slice(start, min(start + chunk, n))))
        j = j + start
        keep = i < j
        first.append(i[keep])
        second.append(j[keep])
    empty = np.zeros(0, dtype=np.int64)
    return (np.concatenate(first).astype(np.int64) if first else empty), (
        np.concatenate(second).astype(np.int64) if second else empty
    )


def image_digests(features: np.ndarray, chunk: int | None = None) -> list[str]:
    """A digest of each image's feature array (``features [n_images, ...]``): equal pictures, equal
    digests, whatever their names or rows (read ``chunk`` images at a time, as :func:`pooled`)."""
    out = []
    for _, part in row_blocks(features, chunk, np.float32):
        for row in part:
            out.append(hashlib.blake2b(np.ascontiguousarray(row).tobytes(), digest_size=12).hexdigest())
    return out


DIGEST_THREADS = 4
"""Rows :func:`stored_digests` hashes at once (hashing a large buffer releases the GIL)."""


def stored_digests(features: np.ndarray, chunk: int | None = None) -> list[str]:
    """A digest of each image's features ``[n_images, ...]`` as stored (their bytes, their dtype
    and row shape; no conversion): equal pictures, equal digests, whatever their names, rows or
    form (a reader's content key, :func:`~mispair.data.readers.table.content_order`). Read a
    block at a time (:func:`~mispair.data.mapped.row_blocks`), :data:`DIGEST_THREADS` rows
    hashed at once: 5,000 EfficientNet grids (49 × 1280 float16) in about 0.8 s on 2 cores,
    where :func:`image_digests`' float32 copies took 4 s."""
    from concurrent.futures import ThreadPoolExecutor

    salt = f"{features.dtype.str}{features.shape[1:]}".encode()

    def digest(row: np.ndarray) -> str:
        found = hashlib.blake2b(salt, digest_size=12)
        found.update(np.ascontiguousarray(row).data)
        return found.hexdigest()

    out: list[str] = []
    with ThreadPoolExecutor(max_workers=DIGEST_THREADS) as pool:
        for _, part in row_blocks(features, chunk):
            out.extend(pool.map(digest, part))
    return out


@dataclass(frozen=True)
class ContentGroups:
    """``of_image [n_images]``: each image's group; ``key [n_groups]``: each group's content key
    (the smallest feature digest among its images: independent of the row order); ``joined_by``:
    what joined the images (:func:`fold_groups`)."""

    of_image: np.ndarray
    key: list[str]
    joined_by: str = ""

    def __len__(self) -> int:
        return len(self.key)


def content_groups(
    features: np.ndarray,
    tokens: Sequence[Sequence[int]],
    image_of_caption: np.ndarray,
    *,
    captions_on_at_most: int | None = None,
    threshold: float | None = NEAR_DUPLICATE_COSINE,
    near: tuple[np.ndarray, np.ndarray] | None = None,
    digests: list[str] | None = None,
) -> ContentGroups:
    """The images of ``features [n_images, ...]`` grouped so that two images with equal features
    (the same picture), with an identical caption (``tokens`` of the pairs, paired by
    ``image_of_caption [n_pairs]``; only the captions on at most ``captions_on_at_most`` images
    when given, none at 0) or whose pooled features have cosine ≥ ``threshold`` (unless None;
    ``near``: those edges computed before) are in one group (connected components, so
    transitively); ``digests``: :func:`image_digests` of ``features`` when computed before."""
    n_images = len(features)
    digests = image_digests(features) if digests is None else digests
    image_of_caption = np.asarray(image_of_caption, dtype=np.int64)
    nodes: dict[object, int] = {}  # a node per distinct digest and per distinct caption
    rows = [np.arange(n_images)]
    cols = [np.array([n_images + nodes.setdefault(("picture", d), len(nodes)) for d in digests])]
    texts = [tuple(t) for t in tokens]
    images_of_text: dict[tuple, set[int]] = {}
    for text, image in zip(texts, image_of_caption.tolist()):
        images_of_text.setdefault(text, set()).add(image)
    limit = n_images if captions_on_at_most is None else captions_on_at_most
    tied = [k for k, text in enumerate(texts) if len(images_of_text[text]) <= limit]
    rows.append(image_of_caption[tied])
    cols.append(np.array([n_images + nodes.setdefault(texts[k], len(nodes)) for k in tied], dtype=np.int64))
    if threshold is not None:
        near_i, near_j = near_duplicate_edges(features, threshold) if near is None else near
        rows.append(near_i)
        cols.append(near_j)
    row, col = np.concatenate(rows).astype(np.int64), np.concatenate(cols).astype(np.int64)
    size = n_images + len(nodes)
    graph = coo_matrix((np.ones(len(row), dtype=np.int8), (row, col)), shape=(size, size))
    _, label = connected_components(graph, directed=False)
    of_image = np.unique(label[:n_images], return_inverse=True)[1].astype(np.int64)
    key = [""] * (int(of_image.max()) + 1 if n_images else 0)
    for image, group in enumerate(of_image.tolist()):
        if not key[group] or digests[image] < key[group]:
            key[group] = digests[image]
    return ContentGroups(of_image, key)


def fold_groups(
    features: np.ndarray, tokens: Sequence[Sequence[int]], image_of_caption: np.ndarray, folds: int
) -> ContentGroups:
    """:func:`content_groups` that can fill ``folds`` folds: the largest group may hold at most
    ``1 / folds`` of the pairs. Near-duplicates are tied first, then identical captions; when the
    groups are too large, the captions on the most images are untied first (halving the limit on
    the number of images a tied caption is on: a caption on a quarter of a collection, an author's
    name or a tag, cannot be held out in one fold of a fifth), and near-duplicates last (a
    random-weight encoder makes every picture alike); the same picture always stays in one fold.
    :attr:`ContentGroups.joined_by` says what joined the images."""
    image_of_caption = np.asarray(image_of_caption, dtype=np.int64)
    n_pairs, n_images = len(image_of_caption), len(features)
    limits = [None]
    while limits[-1] != 0:
        limits.append(n_images // folds if limits[-1] is None else limits[-1] // 2)
    near = near_duplicate_edges(features, NEAR_DUPLICATE_COSINE)
    digests = image_digests(features)
    groups = None
    for threshold in (NEAR_DUPLICATE_COSINE, None):
        for limit in limits:
            groups = content_groups(
                features,
                tokens,
                image_of_caption,
                captions_on_at_most=limit,
                threshold=threshold,
                near=near,
                digests=digests,
            )
            if np.bincount(groups.of_image[image_of_caption]).max() * folds <= n_pairs:
                return replace(groups, joined_by=_ties(threshold, limit))
    return replace(groups, joined_by=_ties(None, 0))


def _ties(threshold: float | None, limit: int | None) -> str:
    """What tied the images into groups, in words."""
    ties = ["the same picture"]
    if threshold is not None:
        ties.append(f"near-duplicates (cosine ≥ {threshold})")
    if limit is None:
        ties.append("identical captions")
    elif limit > 0:
        ties.append(f"identical captions on at most {limit} images")
    return ", ".join(ties)


def deal_groups(groups: ContentGroups, pairs_of_group: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """``[n_groups]`` fold of each group: the groups taken in the order of a digest of ``seed`` and
    their key, each to the fold that holds the fewest pairs so far (``pairs_of_group [n_groups]``;
    ties to the lowest fold), so the folds are near-equal in pairs and depend on the content only."""
    if folds < 2:
        raise DataError(
            f"out-of-fold scoring needs pictures of at least 2 different contents, got {folds} "
            "fold(s): the collection's pictures are all the same picture (or near-duplicates of "
            "one); score a collection of different pictures"
        )
    order = sorted(
        range(len(groups)),
        key=lambda g: hashlib.blake2b(f"{seed}:{groups.key[g]}".encode(), digest_size=8).digest(),
    )
    fold_of = np.empty(len(groups), dtype=np.int64)
    load = [(0, k) for k in range(folds)]
    for g in order:
        pairs, k = heapq.heappop(load)
        fold_of[g] = k
        heapq.heappush(load, (pairs + int(pairs_of_group[g]), k))
    return fold_of


def content_folds(groups: ContentGroups, image_of_caption: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """``[n_pairs]`` fold of every pair: the fold :func:`deal_groups` gives its image's group."""
    group_of_pair = groups.of_image[np.asarray(image_of_caption, dtype=np.int64)]
    pairs_of_group = np.bincount(group_of_pair, minlength=len(groups))
    return deal_groups(groups, pairs_of_group, folds, seed)[group_of_pair]

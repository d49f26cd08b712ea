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
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from mispair.ann import IndexSpec, faiss_installed, range_pairs
from mispair.data.mapped import row_blocks

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
"""Up to this many images, :func:`near_duplicate_edges` compares every pair (``n² D`` products: 16
s for 50,000 images of 1,280 numbers on 2 cores); above it, through an IVF index when FAISS is
installed (200,000 images: minutes exactly, seconds by the index)."""

NEAR_DUPLICATE_PROBE = 8
"""The IVF cells (of ``√n``) a near-duplicate search visits around each image: two images at
cosine ≥ 0.99 lie in the same cell or adjacent ones."""


def near_duplicate_edges(
    vectors: np.ndarray,
    threshold: float = NEAR_DUPLICATE_COSINE,
    chunk: int = 512,
    *,
    exact_up_to: int = EXACT_IMAGES,
) -> tuple[np.ndarray, np.ndarray]:
    """``(i, j)`` with ``i < j``: every pair of rows of ``vectors [n, D]`` (unit rows) with cosine
    similarity ≥ ``threshold``: all pairs compared up to ``exact_up_to`` rows (memory: ``chunk ×
    n``), else the pairs within :data:`NEAR_DUPLICATE_PROBE` cells of an IVF index of ``√n``
    cells (:func:`~mispair.ann.range_pairs`), when FAISS is installed."""
    if len(vectors) > exact_up_to and faiss_installed():
        cells = IndexSpec(kind="ivf", nlist=max(1, round(len(vectors) ** 0.5)), nprobe=NEAR_DUPLICATE_PROBE)
        return range_pairs(vectors, threshold, cells)
    first, second = [], []
    for start in range(0, len(vectors), chunk):
        close = vectors[start : start + chunk] @ vectors.T >= threshold
        rows, cols = np.nonzero(close)
        rows = rows + start
        keep = rows < cols
        first.append(rows[keep])
        second.append(cols[keep])
    empty = np.zeros(0, dtype=np.int64)
    return (np.concatenate(first) if first else empty), (np.concatenate(second) if second else empty)


def image_digests(features: np.ndarray, chunk: int | None = None) -> list[str]:
    """A digest of each image's feature array (``features [n_images, ...]``): equal pictures, equal
    digests, whatever their names or rows (read ``chunk`` images at a time, as :func:`pooled`)."""
    out = []
    for _, part in row_blocks(features, chunk, np.float32):
        for row in part:
            out.append(hashlib.blake2b(np.ascontiguousarray(row).tobytes(), digest_size=12).hexdigest())
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
        near_i, near_j = near_duplicate_edges(pooled(features), threshold) if near is None else near
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
    near = near_duplicate_edges(pooled(features), NEAR_DUPLICATE_COSINE)
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
        raise ValueError(f"out-of-fold scoring needs at least 2 folds, got {folds}")
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

"""The retrieval protocol of the papers: R@1/5/10, medr, meanr and rSum in both directions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from scipy.sparse import coo_matrix

from mispair.errors import DataError, DivergedError

METRIC_KEYS = (
    "i2t_r1",
    "i2t_r5",
    "i2t_r10",
    "i2t_medr",
    "i2t_meanr",
    "t2i_r1",
    "t2i_r5",
    "t2i_r10",
    "t2i_medr",
    "t2i_meanr",
    "rsum",
)


def retrieval_metrics(
    sims: np.ndarray | torch.Tensor,
    captions_per_image: int = 5,
    folds: int = 1,
    *,
    caption_groups: np.ndarray | None = None,
    image_of_caption: np.ndarray | None = None,
) -> dict[str, float]:
    """Image→text and text→image retrieval metrics of a ``[n_images, n_captions]`` score matrix.

    Caption ``k`` belongs to image ``k // captions_per_image``, or to ``image_of_caption[k]`` when
    given (any number of captions per image, one fold; ``captions_per_image`` is then not read).
    For image→text, the rank of an image is that of its best-ranked own caption; for text→image,
    the rank of the caption's image.
    Ties are broken against the ground truth (a candidate scoring equal to the ground truth ranks
    above it), so a constant score matrix earns no recall. ``R@K`` is the percentage of queries
    with rank < K; ``medr`` is the median rank and ``meanr`` the mean rank, 1-based (medr as the
    reference code reports it: floor of the median, plus one); ``rsum`` is the sum of the six recalls.

    With ``folds > 1`` the images are cut into that many consecutive folds (COCO 5-fold 1K:
    ``folds=5`` on the 5K test set), the metrics are computed per fold and averaged; ``rsum`` is
    the sum of the averaged recalls (= the mean of the fold rSums).

    With ``caption_groups`` (``[n_captions]`` labels of identical caption texts), a retrieved
    caption or image counts as correct when its caption text equals the ground truth's
    ("equivalent-caption recall", for collections whose captions repeat).

    Example:
        >>> import numpy as np
        >>> retrieval_metrics(np.eye(3), captions_per_image=1)["rsum"]
        600.0
    """
    sims = sims.detach().float().cpu().numpy() if isinstance(sims, torch.Tensor) else np.asarray(sims)
    if sims.ndim != 2:
        raise DataError(f"similarity matrix must be [n_images, n_captions], got shape {sims.shape}")
    _finite(sims)
    n_images, n_captions = sims.shape
    if caption_groups is not None and np.shape(caption_groups) != (n_captions,):
        raise DataError(f"caption_groups needs {n_captions} entries, got shape {np.shape(caption_groups)}")
    if image_of_caption is not None:
        owner = _owners(np.asarray(image_of_caption, dtype=np.int64), n_images, n_captions, folds)
        return _averaged([_fold_metrics(sims, owner, caption_groups)])
    per_fold = []
    for rows, cols, owner in _folds(n_images, n_captions, captions_per_image, folds):
        groups = None if caption_groups is None else np.asarray(caption_groups)[cols]
        per_fold.append(_fold_metrics(sims[rows, cols], owner, groups))
    return _averaged(per_fold)


def _finite(sims: np.ndarray) -> np.ndarray:
    """``sims``, after a one-line error if any is NaN or infinite (NaN would rank as a match: a
    diverged model must not score)."""
    if not np.isfinite(sims).all():
        raise DivergedError(
            f"{int((~np.isfinite(sims)).sum())} similarities are NaN or infinite: "
            "the model's weights diverged (lower train.lr)"
        )
    return sims


def _owners(owner: np.ndarray, n_images: int, n_captions: int, folds: int) -> np.ndarray:
    """``image_of_caption`` checked: ``n_captions`` indices of the ``n_images``, one fold."""
    inside = owner.shape == (n_captions,) and 0 <= owner.min(initial=0) <= owner.max(initial=0) < n_images
    if folds != 1 or not inside:
        raise DataError(f"image_of_caption: {n_captions} image indices in [0, {n_images}) and one fold")
    return owner


def _folds(
    n_images: int, n_captions: int, captions_per_image: int, folds: int
) -> list[tuple[slice, slice, np.ndarray]]:
    """``(images, captions, owner)`` of each fold, ``captions_per_image`` captions an image (caption
    ``k`` of the fold is image ``owner[k]``'s), after checking the layout."""
    if n_captions != n_images * captions_per_image:
        raise DataError(
            f"similarity matrix has {n_captions} captions for {n_images} images, "
            f"expected {captions_per_image} per image"
        )
    if folds < 1 or n_images % folds:
        raise DataError(f"{n_images} images cannot be cut into {folds} equal folds")
    size, per = n_images // folds, captions_per_image
    owner = np.arange(size * per) // per
    return [
        (slice(f * size, (f + 1) * size), slice(f * size * per, (f + 1) * size * per), owner)
        for f in range(folds)
    ]


def _averaged(per_fold: list[dict[str, float]]) -> dict[str, float]:
    """The folds' metrics averaged (those every fold has), ``rsum`` the sum of the averaged recalls."""
    keys = [k for k in METRIC_KEYS if all(k in m for m in per_fold)]
    mean = {k: float(np.mean([m[k] for m in per_fold])) for k in keys if k != "rsum"}
    mean["rsum"] = sum(mean[f"{d}_r{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10))
    return {k: mean[k] for k in METRIC_KEYS if k in mean}


def streamed_retrieval_metrics(
    block: Callable[[slice, slice], np.ndarray],
    n_images: int,
    n_captions: int,
    captions_per_image: int = 5,
    folds: int = 1,
    *,
    caption_groups: np.ndarray | None = None,
    image_of_caption: np.ndarray | None = None,
) -> dict[str, float]:
    """:func:`retrieval_metrics` of the ``[n_images, n_captions]`` score matrix whose block of
    rows ``images`` and columns ``captions`` is ``block(images, captions)``, never held whole:
    each block of images is scored twice (image→text ranks and each caption's best correct
    score; then, for text→image, how many other images reach it). The same metrics, for twice
    the scoring: for splits whose matrix would not fit in memory (a 100,000-image split with
    500,000 captions: 200 GB)."""
    if image_of_caption is not None:
        owner = _owners(np.asarray(image_of_caption, dtype=np.int64), n_images, n_captions, folds)
        spans = [(slice(0, n_images), slice(0, n_captions), owner)]
    else:
        spans = _folds(n_images, n_captions, captions_per_image, folds)
    groups = None if caption_groups is None else np.asarray(caption_groups)
    if groups is not None and groups.shape != (n_captions,):
        raise DataError(f"caption_groups needs {n_captions} entries, got shape {groups.shape}")
    per_fold = []
    for rows, cols, fold_owner in spans:
        fold_groups = None if groups is None else groups[cols]
        scores = lambda images, rows=rows, cols=cols: _finite(  # noqa: E731
            block(slice(rows.start + images.start, rows.start + images.stop), cols)
        )
        per_fold.append(_streamed_fold(scores, rows.stop - rows.start, fold_owner, fold_groups))
    return _averaged(per_fold)


def _streamed_fold(
    scores: Callable[[slice], np.ndarray], n_images: int, owner: np.ndarray, groups: np.ndarray | None
) -> dict[str, float]:
    """:func:`_fold_metrics` with the fold's rows read a block at a time through ``scores``."""
    by_image, _, keys = _membership(owner, groups, n_images)
    n_captions = len(owner)
    step = max(1, STREAM_TILE // max(1, n_captions))
    blocks = [slice(start, min(start + step, n_images)) for start in range(0, n_images, step)]
    best = np.full(n_captions, -np.inf)
    i2t = []
    for rows in blocks:
        sims, correct = scores(rows), by_image[rows][:, keys].toarray() > 0
        i2t.append(_ranks(sims, correct))
        best = np.maximum(best, np.where(correct, sims, -np.inf).max(axis=0, initial=-np.inf))
    t2i = np.zeros(n_captions, dtype=np.int64)
    for rows in blocks:
        sims, correct = scores(rows), by_image[rows][:, keys].toarray() > 0
        t2i += ((sims >= best[None, :]) & ~correct).sum(axis=0)
    ranks = np.concatenate(i2t) if i2t else np.zeros(0, dtype=np.int64)
    return {**rank_metrics("i2t", ranks), **rank_metrics("t2i", t2i)}


def _fold_metrics(sims: np.ndarray, owner: np.ndarray, caption_groups: np.ndarray | None) -> dict[str, float]:
    """The metrics of one fold whose caption ``k`` belongs to image ``owner[k]``: queries ranked a
    block at a time (:data:`TILE` scores), so that no ``[n_images, n_captions]`` temporary is
    made beside ``sims`` (a 10,000-image split with 50,000 captions: 2 GB each)."""
    n_images, n_captions = sims.shape
    by_image, by_key, keys = _membership(owner, caption_groups, n_images)
    i2t = _blocked_ranks(
        n_images, n_captions, lambda rows: (sims[rows], by_image[rows][:, keys].toarray() > 0)
    )
    t2i = _blocked_ranks(
        n_captions, n_images, lambda cols: (sims[:, cols].T, by_key[:, keys[cols]].toarray().T > 0)
    )
    return {**rank_metrics("i2t", i2t), **rank_metrics("t2i", t2i)}


def _membership(
    owner: np.ndarray, caption_groups: np.ndarray | None, n_images: int
) -> tuple[Any, Any, np.ndarray]:
    """``(by_image, by_key, keys)``: which images own which caption keys, as a CSR and a CSC matrix
    ``[n_images, n_keys]`` (> 0: owned), and ``keys [n_captions]`` each caption's key (its text's
    group with ``caption_groups``, else the caption itself): caption ``k`` is correct for image
    ``i`` when ``by_image[i, keys[k]] > 0``."""
    n_captions = len(owner)
    groups = np.arange(n_captions) if caption_groups is None else np.asarray(caption_groups)
    keys = np.unique(groups, return_inverse=True)[1].reshape(-1)
    shape = (n_images, int(keys.max(initial=-1)) + 1)
    member = coo_matrix((np.ones(n_captions, dtype=np.int32), (owner, keys)), shape=shape)
    return member.tocsr(), member.tocsc(), keys


TILE = 1 << 22
"""The scores :func:`_blocked_ranks` ranks at a time (16 MiB of float32)."""

STREAM_TILE = 1 << 24
"""The scores :func:`streamed_retrieval_metrics` asks for at a time (64 MiB of float32)."""


def _blocked_ranks(
    n_queries: int, n_candidates: int, block: Callable[[slice], tuple[np.ndarray, np.ndarray]]
) -> np.ndarray:
    """:func:`_ranks` of ``n_queries`` queries, ``block(queries) -> (scores, correct)`` of a block
    of them against every candidate at a time."""
    step = max(1, TILE // max(1, n_candidates))
    ranks = [_ranks(*block(slice(start, start + step))) for start in range(0, n_queries, step)]
    return np.concatenate(ranks) if ranks else np.zeros(0, dtype=np.int64)


def rank_metrics(direction: str, ranks: np.ndarray) -> dict[str, float]:
    """``{direction}_r1/_r5/_r10`` (percent of queries with 0-based rank below K), ``_medr`` and
    ``_meanr`` (1-based) of ``ranks [n_queries]``. A rank may be ``inf`` (the query's ground truth
    is not among the candidates it was given, e.g. a top-k list); a median or mean that would
    depend on such a rank is left out.

    Example:
        >>> rank_metrics("t2i", np.array([0.0, 3.0, 7.0, np.inf]))
        {'t2i_r1': 25.0, 't2i_r5': 50.0, 't2i_r10': 75.0, 't2i_medr': 6.0}
    """
    out = {f"{direction}_r{k}": 100.0 * float(np.mean(ranks < k)) for k in (1, 5, 10)}
    median = np.median(ranks)
    if np.isfinite(median):
        out[f"{direction}_medr"] = float(np.floor(median) + 1)
    if np.isfinite(ranks).all():
        out[f"{direction}_meanr"] = float(np.mean(ranks) + 1)
    return out


def _ranks(scores: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """0-based rank of each query's best correct candidate: the number of incorrect candidates
    scoring at least as high. ``scores``/``correct``: ``[n_queries, n_candidates]``."""
    best = np.where(correct, scores, -np.inf).max(axis=1, keepdims=True)
    return ((scores >= best) & ~correct).sum(axis=1)


METRIC_ORDER = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10", "rsum")


def format_metrics(metrics: dict[str, float], title: str = "") -> str:
    """A one-table summary of retrieval metrics (and equivalent-caption ones when present)."""
    head = "       " + " ".join(f"{k.replace('_', ' '):>8}" for k in METRIC_ORDER)
    lines = [title, head] if title else [head]
    for prefix, label in (("", "strict"), ("eq_", "equiv.")):
        if f"{prefix}rsum" in metrics:
            row = " ".join(f"{metrics[prefix + k]:8.1f}" for k in METRIC_ORDER)
            lines.append(f"{label:>6} {row}")
    ranks = [
        f"{name} i2t {metrics[f'i2t_{name}']:.{places}f} t2i {metrics[f't2i_{name}']:.{places}f}"
        for name, places in (("medr", 0), ("meanr", 1))
        if f"i2t_{name}" in metrics and f"t2i_{name}" in metrics
    ]
    lines.append("; ".join(ranks) or "medr, meanr: beyond the top-k lists")
    return "\n".join(lines)

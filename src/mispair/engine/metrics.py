"""The retrieval protocol of the papers: R@1/5/10, medr, meanr and rSum in both directions."""

from __future__ import annotations

from collections.abc import Callable

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
    if not np.isfinite(sims).all():  # NaN would rank as a match: a diverged model must not score
        raise DivergedError(
            f"{int((~np.isfinite(sims)).sum())} similarities are NaN or infinite: "
            "the model's weights diverged (lower train.lr)"
        )
    n_images, n_captions = sims.shape
    if caption_groups is not None and np.shape(caption_groups) != (n_captions,):
        raise DataError(f"caption_groups needs {n_captions} entries, got shape {np.shape(caption_groups)}")
    if image_of_caption is not None:
        owner = np.asarray(image_of_caption, dtype=np.int64)
        inside = owner.shape == (n_captions,) and 0 <= owner.min(initial=0) <= owner.max(initial=0) < n_images
        if folds != 1 or not inside:
            raise DataError(f"image_of_caption: {n_captions} image indices in [0, {n_images}) and one fold")
        metrics = _fold_metrics(sims, owner, caption_groups)
        metrics["rsum"] = sum(metrics[f"{d}_r{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10))
        return {k: metrics[k] for k in METRIC_KEYS if k in metrics}
    if n_captions != n_images * captions_per_image:
        raise DataError(
            f"similarity matrix has {n_captions} captions for {n_images} images, "
            f"expected {captions_per_image} per image"
        )
    if folds < 1 or n_images % folds:
        raise DataError(f"{n_images} images cannot be cut into {folds} equal folds")
    size = n_images // folds
    per_fold = []
    for f in range(folds):
        rows = slice(f * size, (f + 1) * size)
        cols = slice(f * size * captions_per_image, (f + 1) * size * captions_per_image)
        groups = None if caption_groups is None else np.asarray(caption_groups)[cols]
        owner = np.arange(size * captions_per_image) // captions_per_image
        per_fold.append(_fold_metrics(sims[rows, cols], owner, groups))
    mean = {k: float(np.mean([m[k] for m in per_fold])) for k in per_fold[0]}
    mean["rsum"] = sum(mean[f"{d}_r{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10))
    return {k: mean[k] for k in METRIC_KEYS}


def _fold_metrics(sims: np.ndarray, owner: np.ndarray, caption_groups: np.ndarray | None) -> dict[str, float]:
    """The metrics of one fold whose caption ``k`` belongs to image ``owner[k]``: queries ranked a
    block at a time (:data:`TILE` scores), so that no ``[n_images, n_captions]`` temporary is
    made beside ``sims`` (a 10,000-image split with 50,000 captions: 2 GB each)."""
    n_images, n_captions = sims.shape
    groups = np.arange(n_captions) if caption_groups is None else np.asarray(caption_groups)
    keys = np.unique(groups, return_inverse=True)[1].reshape(-1)
    # member[i, key] > 0: image i has a caption of that key (the caption itself, or its text)
    shape = (n_images, int(keys.max(initial=-1)) + 1)
    member = coo_matrix((np.ones(n_captions, dtype=np.int32), (owner, keys)), shape=shape)
    by_image, by_key = member.tocsr(), member.tocsc()
    i2t = _blocked_ranks(
        n_images, n_captions, lambda rows: (sims[rows], by_image[rows][:, keys].toarray() > 0)
    )
    t2i = _blocked_ranks(
        n_captions, n_images, lambda cols: (sims[:, cols].T, by_key[:, keys[cols]].toarray().T > 0)
    )
    return {**rank_metrics("i2t", i2t), **rank_metrics("t2i", t2i)}


TILE = 1 << 22
"""The scores :func:`_blocked_ranks` ranks at a time (16 MiB of float32)."""


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

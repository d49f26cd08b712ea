"""The retrieval protocol from an index's top-k lists: no ``[n_images, n_captions]`` matrix.

Every caption searches the images and every image searches the captions (their stored vectors
are the queries); a query's rank is computed as :func:`~mispair.engine.metrics.retrieval_metrics`
computes it (the number of wrong candidates scoring at least as high as the best right one,
ties against the ground truth), within its list. With an exact index and lists of length ``k``,
R@1/5/10 equal the full matrix's whenever ``k >= 10``; a query whose ground truth is not in its
list has an unknown rank beyond ``k``, so medr is reported only when the median rank lies within
the lists, and meanr only when every rank does. ``rerank=K`` orders each query's first ``K``
candidates by the checkpoint's head, and those ``K`` are the list.
"""

from __future__ import annotations

import numpy as np

from mispair.data.pairset import caption_groups
from mispair.engine.metrics import rank_metrics
from mispair.errors import ConfigError, DataError
from mispair.progress import progress_bar
from mispair.search.index import Index


def evaluate_index(
    index: Index, *, k: int = 100, rerank: int = 0, progress: bool = False
) -> dict[str, float]:
    """Image→text and text→image R@1/5/10 and rSum of the collection of ``index`` from top-``k``
    lists (``rerank=K``: the first ``K`` candidates reordered by the head), plus ``eq_*`` variants
    when captions repeat (one caption per image), as :func:`mispair.engine.evaluation.evaluate_split`.
    """
    k = rerank or k
    if k < 10:
        raise ConfigError(f"--top-k {k}: recall@10 needs lists of at least 10")
    owner, images = index.image_of_caption, np.arange(index.n_images)
    per_image = index.n_captions // max(index.n_images, 1)
    layout = np.arange(index.n_captions) // max(per_image, 1)
    if per_image * index.n_images != index.n_captions or not np.array_equal(owner, layout):
        raise DataError(f"{index.path}: evaluation needs caption k of image k // c for every caption")
    t2i = ranked_lists(index, "images", k, rerank, progress)
    i2t = ranked_lists(index, "captions", k, rerank, progress)
    metrics = _metrics(t2i, i2t, owner[:, None] == t2i[1], owner[i2t[1]] == images[:, None])
    groups = caption_groups(index.captions) if per_image == 1 else None
    if groups is not None and len(set(groups.tolist())) < len(groups):
        equivalent = _metrics(t2i, i2t, groups[t2i[1]] == groups[:, None], groups[i2t[1]] == groups[:, None])
        metrics.update({f"eq_{key}": value for key, value in equivalent.items()})
    return metrics


def ranked_lists(
    index: Index, target: str, k: int, rerank: int = 0, progress: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``scores [q, k]`` and ``ids [q, k]`` (-1 where nothing was found) of every item of the
    other side (its stored vector) searching ``target`` (``images``: every caption is a query);
    ``rerank=K``: each list's first ``K`` reordered by the head (``k = K``)."""
    queries = index.vectors("captions" if target == "images" else "images")
    scores, ids = index.search_vectors(queries, rerank or k, target)
    if not rerank:
        return scores, ids
    bar = progress_bar(range(len(queries)), desc=f"rerank {target}", disable=not progress, leave=False)
    for q in bar:
        found = ids[q][ids[q] >= 0]
        if target == "images":
            caption = index.captions[q]
            reranked = index.rerank_images(found, index.model.tokenizer.encode(caption))
        else:
            reranked = index.rerank_captions(found, index.collection().image_features(np.array([q])))
        scores[q, : len(found)], ids[q, : len(found)] = reranked
    return scores, ids


def _metrics(
    t2i: tuple[np.ndarray, np.ndarray],
    i2t: tuple[np.ndarray, np.ndarray],
    t2i_correct: np.ndarray,
    i2t_correct: np.ndarray,
) -> dict[str, float]:
    metrics = {
        **rank_metrics("i2t", list_ranks(*i2t, i2t_correct)),
        **rank_metrics("t2i", list_ranks(*t2i, t2i_correct)),
    }
    metrics["rsum"] = sum(metrics[f"{d}_r{n}"] for d in ("i2t", "t2i") for n in (1, 5, 10))
    return metrics


def list_ranks(scores: np.ndarray, ids: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """``[q]`` 0-based rank of each query's best correct candidate within its list (``scores``,
    ``ids``, ``correct``: ``[q, k]``; ``ids`` -1 are empty slots): the number of wrong candidates
    scoring at least as high; ``inf`` when no correct candidate is in the list."""
    valid = ids >= 0
    correct = correct & valid
    best = np.where(correct, scores, -np.inf).max(axis=1, keepdims=True)
    ranks = ((scores >= best) & ~correct & valid).sum(axis=1).astype(np.float64)
    return np.where(correct.any(axis=1), ranks, np.inf)

"""The audit's map: every image and caption placed in two dimensions from the run's joint
embedding, for the report to draw (it computes nothing itself).

Each modality is centred first (the gap between the image and the caption clouds removed, so a
caption lands near the images it fits); then UMAP (``umap-learn``, when importable and the points
are at most ``max_umap``) or PCA (scikit-learn) projects the images and captions together, and
the coordinates are scaled into ``[0, 1]`` jointly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from mispair.audit.page_data import MAP_COLUMNS
from mispair.data.batching import TrainingPairs
from mispair.encoding import evaluating, image_batches, text_batches
from mispair.engine.trained import TrainedRun


@dataclass
class MapPoints:
    """``images [n_images, 2]`` and ``captions [n_captions, 2]`` in ``[0, 1]``; ``method``:
    ``"umap"`` or ``"pca"``."""

    images: np.ndarray
    captions: np.ndarray
    method: str


MAX_UMAP = 50_000
"""The most points (images and captions) UMAP places; above, PCA (:func:`pca_points`)."""


def embedding_map(
    run: TrainedRun, pairs: TrainingPairs, *, seed: int = 0, max_umap: int = MAX_UMAP
) -> MapPoints:
    """:class:`MapPoints` of ``pairs``' images and captions under the run's first model: UMAP up to
    ``max_umap`` points (:func:`project`); above, PCA with the captions' embeddings made twice a
    batch at a time (:func:`pca_points`) instead of held: memory ``n_images × d``, not
    ``(n_images + n_captions) × d`` several times over (a million captions: 1 GB a copy)."""
    if _has_umap() and pairs.pairs.n_images + len(pairs) <= max_umap:
        return project(*pooled_embeddings(run, pairs), seed=seed, max_umap=max_umap)
    images = np.concatenate(list(pooled_batches(run, pairs, "images")))
    return _scaled(*pca_points(images, lambda: pooled_batches(run, pairs, "captions")), "pca")


def pooled_embeddings(run: TrainedRun, pairs: TrainingPairs) -> tuple[np.ndarray, np.ndarray]:
    """``([n_images, d], [n_captions, d])`` the global embeddings of ``pairs``' images and captions
    under the run's first model (only the pooled vectors are kept: memory ``n × d``)."""
    images = np.concatenate(list(pooled_batches(run, pairs, "images")))
    return images, np.concatenate(list(pooled_batches(run, pairs, "captions")))


def pooled_batches(run: TrainedRun, pairs: TrainingPairs, side: str) -> Iterator[np.ndarray]:
    """The pooled embeddings ``[b, d]`` (float32) of ``pairs``' ``"images"`` or ``"captions"``
    under the run's first model, a batch at a time."""
    model, size = run.models[0], run.config.train.eval_batch_size
    with evaluating(model), torch.no_grad():
        if side == "images":
            batches = image_batches(model, pairs.pairs, batch_size=size, device=run.device)
        else:
            batches = text_batches(model, pairs.tokens, batch_size=size, device=run.device)
        for batch in batches:
            yield batch.pooled.float().cpu().numpy()


def project(
    images: np.ndarray, captions: np.ndarray, *, seed: int = 0, max_umap: int = MAX_UMAP
) -> MapPoints:
    """:class:`MapPoints` of the embeddings ``images [n_images, d]`` and ``captions [n_captions, d]``
    (module docstring)."""
    if not (_has_umap() and len(images) + len(captions) <= max_umap):
        return _scaled(*pca_points(images, lambda: iter([captions])), "pca")
    import umap

    points = np.concatenate([images - images.mean(axis=0), captions - captions.mean(axis=0)])
    flat = umap.UMAP(n_components=2, random_state=seed, metric="cosine").fit_transform(points)
    return _scaled(flat[: len(images)], flat[len(images) :], "umap")


def pca_points(
    images: np.ndarray, caption_batches: Callable[[], Iterator[np.ndarray]], block: int = 65_536
) -> tuple[np.ndarray, np.ndarray]:
    """``([n_images, 2], [n_captions, 2])``: the images and the captions, each centred on its own
    mean, projected on the two principal axes of them all, as scikit-learn's PCA places them
    (the axes' signs too: each axis's largest component positive). ``caption_batches()`` gives
    the captions ``[b, d]`` a batch at a time; it is called twice (the scatter matrix, then the
    projection), so no more than a batch of captions is held.

    The axes are the top eigenvectors of the scatter ``Σ (x − μ)(x − μ)ᵀ`` summed over both
    modalities, a caption batch adding ``Σ x xᵀ`` and its sum (``− n_c μ_c μ_cᵀ`` at the end),
    in float64."""
    dim = images.shape[1]
    image_mean = images.mean(axis=0, dtype=np.float64)
    scatter = np.zeros((dim, dim))
    for start in range(0, len(images), block):
        centred = images[start : start + block] - image_mean
        scatter += centred.T @ centred
    n_captions, total = 0, np.zeros(dim)
    for batch in caption_batches():
        batch = batch.astype(np.float64)
        n_captions, total = n_captions + len(batch), total + batch.sum(axis=0)
        scatter += batch.T @ batch
    caption_mean = total / max(n_captions, 1)
    scatter -= n_captions * np.outer(caption_mean, caption_mean)
    top = np.linalg.eigh(scatter)[1][:, ::-1][:, :2]
    axes = np.zeros((dim, 2))
    axes[:, : top.shape[1]] = top * np.sign(top[np.abs(top).argmax(axis=0), range(top.shape[1])])
    flat_images = np.concatenate(
        [(images[start : start + block] - image_mean) @ axes for start in range(0, len(images), block)]
        or [np.zeros((0, 2))]
    )
    flat_captions = [(batch - caption_mean) @ axes for batch in caption_batches()]
    return flat_images, np.concatenate(flat_captions or [np.zeros((0, 2))])


def _scaled(images: np.ndarray, captions: np.ndarray, method: str) -> MapPoints:
    """:class:`MapPoints` of 2-D points, scaled into ``[0, 1]`` jointly (per coordinate)."""
    flat = np.concatenate([images, captions])
    low, high = flat.min(axis=0), flat.max(axis=0)
    scale = np.where(high > low, high - low, 1.0)
    return MapPoints((images - low) / scale, (captions - low) / scale, method)


def _has_umap() -> bool:
    try:
        import umap  # noqa: F401
    except ImportError:
        return False
    return True


def map_columns(points: MapPoints, image_of_caption: np.ndarray, order: np.ndarray) -> dict[str, np.ndarray]:
    """The :data:`MAP_COLUMNS` of the pairs in ``order`` (pair indices, the table's rows), each
    caption ``k`` paired with the image ``image_of_caption[k]``."""
    image = points.images[image_of_caption[order]]
    caption = points.captions[order]
    return dict(
        zip(
            MAP_COLUMNS,
            (image[:, 0].round(4), image[:, 1].round(4), caption[:, 0].round(4), caption[:, 1].round(4)),
        )
    )

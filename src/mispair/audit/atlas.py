"""The audit's map: every image and caption placed in two dimensions from the run's joint
embedding, for the report to draw (it computes nothing itself).

Each modality is centred first (the gap between the image and the caption clouds removed, so a
caption lands near the images it fits); then UMAP (``umap-learn``, when importable and the points
are at most ``max_umap``) or PCA (scikit-learn) projects the images and captions together, and
the coordinates are scaled into ``[0, 1]`` jointly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mispair.audit.page_data import MAP_COLUMNS
from mispair.data.batching import TrainingPairs
from mispair.encoding import evaluating, image_batches, text_batches
from mispair.engine.export import TrainedRun


@dataclass
class MapPoints:
    """``images [n_images, 2]`` and ``captions [n_captions, 2]`` in ``[0, 1]``; ``method``:
    ``"umap"`` or ``"pca"``."""

    images: np.ndarray
    captions: np.ndarray
    method: str


def pooled_embeddings(run: TrainedRun, pairs: TrainingPairs) -> tuple[np.ndarray, np.ndarray]:
    """``([n_images, d], [n_captions, d])`` the global embeddings of ``pairs``' images and captions
    under the run's first model (only the pooled vectors are kept: memory ``n × d``)."""
    model, size = run.models[0], run.config.train.eval_batch_size
    with evaluating(model), torch.no_grad():
        images = [
            b.pooled.float().cpu().numpy()
            for b in image_batches(model, pairs.pairs, batch_size=size, device=run.device)
        ]
        texts = [
            b.pooled.float().cpu().numpy()
            for b in text_batches(model, pairs.tokens, batch_size=size, device=run.device)
        ]
    return np.concatenate(images), np.concatenate(texts)


def project(images: np.ndarray, captions: np.ndarray, *, seed: int = 0, max_umap: int = 50_000) -> MapPoints:
    """:class:`MapPoints` of the embeddings ``images [n_images, d]`` and ``captions [n_captions, d]``
    (module docstring)."""
    points = np.concatenate([images - images.mean(axis=0), captions - captions.mean(axis=0)])
    method = "umap" if _has_umap() and len(points) <= max_umap else "pca"
    if method == "umap":
        import umap

        flat = umap.UMAP(n_components=2, random_state=seed, metric="cosine").fit_transform(points)
    else:
        from sklearn.decomposition import PCA

        flat = PCA(n_components=2, random_state=seed).fit_transform(points)
    low, high = flat.min(axis=0), flat.max(axis=0)
    flat = (flat - low) / np.where(high > low, high - low, 1.0)
    return MapPoints(flat[: len(images)], flat[len(images) :], method)


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

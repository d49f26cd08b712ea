"""The audit's map: each modality centred before the projection, so a caption lands beside the
image it was written for even when the two embedding clouds lie far apart; PCA when umap-learn
is absent, coordinates in [0, 1]."""

import numpy as np

from mispair.audit import atlas
from mispair.audit.atlas import map_columns, project


def test_a_caption_lands_beside_its_image_across_the_modality_gap(monkeypatch):
    monkeypatch.setattr(atlas, "_has_umap", lambda: False)
    rng = np.random.default_rng(0)
    images = rng.normal(size=(60, 16))
    gap = np.zeros(16)
    gap[0] = 40.0  # the two clouds far apart along one direction, as joint embeddings are
    captions = images + rng.normal(scale=0.05, size=images.shape) + gap
    points = project(images, captions)
    assert points.method == "pca"
    both = np.concatenate([points.images, points.captions])
    assert both.min() == 0 and both.max() == 1
    nearest = np.linalg.norm(points.captions[:, None] - points.images[None], axis=-1).argmin(axis=1)
    assert (nearest == np.arange(60)).mean() > 0.5  # without centring, every caption sits across the gap
    uncentred = np.concatenate([images, captions])
    flat = uncentred @ np.linalg.svd(uncentred - uncentred.mean(0), full_matrices=False)[2][:2].T
    nearest_uncentred = np.linalg.norm(flat[60:, None] - flat[None, :60], axis=-1).argmin(axis=1)
    assert (nearest_uncentred == np.arange(60)).mean() < 0.2


def test_the_map_columns_follow_the_table_order():
    images, captions = np.array([[0.0, 0.1], [0.2, 0.3]]), np.array([[0.4, 0.5], [0.6, 0.7], [0.8, 0.9]])
    points = atlas.MapPoints(images, captions, "pca")
    columns = map_columns(points, image_of_caption=np.array([0, 1, 1]), order=np.array([2, 0, 1]))
    assert columns["map_image_x"].tolist() == [0.2, 0.0, 0.2]
    assert columns["map_caption_y"].tolist() == [0.9, 0.5, 0.7]

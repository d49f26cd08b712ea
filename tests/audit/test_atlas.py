"""The audit's map: each modality centred before the projection, so a caption lands beside the
image it was written for even when the two embedding clouds lie far apart; PCA when umap-learn
is absent, coordinates in [0, 1]; the PCA, its captions read a batch at a time, places the points
where scikit-learn's PCA does."""

import numpy as np
import pytest
from sklearn.decomposition import PCA

from mispair.audit import atlas
from mispair.audit.atlas import map_columns, pca_points, project


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


@pytest.mark.parametrize("batch", [1, 7, 500])
def test_the_pca_of_captions_read_in_batches_is_scikit_learns(batch):
    rng = np.random.default_rng(batch)
    spread = rng.normal(size=(12, 12))  # correlated coordinates: distinct principal axes
    images = (rng.normal(size=(80, 12)) @ spread + 5.0).astype(np.float32)
    captions = (rng.normal(size=(230, 12)) @ spread - 3.0).astype(np.float32)
    calls = []

    def batches():
        calls.append(1)
        return iter([captions[s : s + batch] for s in range(0, len(captions), batch)])

    flat_images, flat_captions = pca_points(images, batches, block=32)
    assert len(calls) == 2  # the scatter, then the projection
    points = np.concatenate([images - images.mean(axis=0), captions - captions.mean(axis=0)])
    want = PCA(n_components=2).fit(points)
    got = np.concatenate([flat_images, flat_captions])
    signs = np.sign((got * want.transform(points)).sum(axis=0))  # scikit-learn's sign rule may differ
    np.testing.assert_allclose(got * signs, want.transform(points), rtol=1e-4, atol=1e-3)
    axes = np.linalg.lstsq(points, got, rcond=None)[0]
    assert (axes[np.abs(axes).argmax(axis=0), [0, 1]] > 0).all()  # each axis's largest component positive

"""The audit's best matches through FAISS against the brute-force reference (``matches_of`` over the
full similarity matrix) on random vectors: the same top captions and images, scores, pair scores
and counts of better images, in the pools or not, the counts read in tiles of any size."""

import numpy as np
import pytest

import mispair.audit.nearest as nearest
from mispair.audit.nearest import count_above, paired_inner, top_inner
from mispair.audit.ranking import SUGGESTIONS, matches_of, suggestion_pools

pytest.importorskip("faiss")


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize("tile", [5, 1 << 22])
@pytest.mark.parametrize("suspects", [False, True])
@pytest.mark.parametrize("shape", [(40, 200), (3, 7), (60, 60)])
def test_faiss_best_matches_equal_the_brute_force_ones(shape, suspects, tile, monkeypatch):
    monkeypatch.setattr(nearest, "TILE", tile)
    rng = np.random.default_rng(sum(shape) + suspects)
    n_images, n_captions = shape
    images, captions = unit_rows(rng, n_images, 24), unit_rows(rng, n_captions, 24)
    image_of_caption = np.sort(rng.integers(0, n_images, n_captions))
    sims = images @ captions.T
    paired = sims[image_of_caption, np.arange(n_captions)]
    pools = (None, None)
    if suspects:
        pools = suggestion_pools(rng.random(n_captions) < 0.4, image_of_caption, n_images)
    k = SUGGESTIONS + 1
    want = matches_of(
        lambda rows: sims[rows],
        n_images,
        image_of_caption,
        paired,
        chunk=16,
        k=k,
        captions_pool=pools[0],
        images_pool=pools[1],
    )
    best_captions, caption_scores = top_inner(captions, images, k, pools[0])
    best_images, image_scores = top_inner(images, captions, k, pools[1])
    pair_score = paired_inner(images, captions, image_of_caption)
    better = count_above(images, captions, pair_score, image_of_caption)
    np.testing.assert_array_equal(best_captions, want.captions)
    np.testing.assert_allclose(caption_scores, want.caption_scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(best_images, want.images)
    np.testing.assert_allclose(image_scores, want.image_scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pair_score, want.pair_score, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(better, want.better_images)


def test_fewer_items_than_asked_are_padded_with_minus_one_and_nan():
    rng = np.random.default_rng(0)
    items, queries = unit_rows(rng, 3, 8), unit_rows(rng, 4, 8)
    ids, scores = top_inner(items, queries, 5, pool=np.array([True, False, True]))
    assert set(ids[:, :2].ravel()) <= {0, 2} and (ids[:, 2:] == -1).all()
    assert np.isnan(scores[:, 2:]).all() and np.isfinite(scores[:, :2]).all()
    np.testing.assert_allclose(scores[:, :2], np.sort(queries @ items[[0, 2]].T, axis=1)[:, ::-1], rtol=1e-5)


@pytest.mark.parametrize("depth", [3, 1000])
def test_above_the_exact_limit_an_ivf_probing_every_cell_gives_the_exact_matches_and_capped_counts(
    depth, monkeypatch
):
    monkeypatch.setattr(nearest, "COUNT_DEPTH", depth)
    rng = np.random.default_rng(depth)
    images, captions = unit_rows(rng, 150, 16), unit_rows(rng, 90, 16)  # √150 ≈ 12 cells < PROBE
    image_of_caption = rng.integers(0, 150, 90)
    assert nearest.index_for(150, 90, exact_up_to=0).kind == "ivf"
    sims = images @ captions.T
    paired = sims[image_of_caption, np.arange(90)]
    ids, scores = top_inner(images, captions, 4, exact_up_to=0)
    want = np.argsort(-sims, axis=0, kind="stable")[:4].T
    np.testing.assert_array_equal(ids, want)
    np.testing.assert_allclose(scores, np.take_along_axis(sims.T, want, axis=1), rtol=1e-5, atol=1e-6)
    loops = [sum(sims[i, c] > paired[c] for i in range(150) if i != image_of_caption[c]) for c in range(90)]
    counted = count_above(images, captions, paired, image_of_caption, exact_up_to=0)
    np.testing.assert_array_equal(counted, np.minimum(loops, depth))


def test_an_ivf_of_a_clustered_collection_finds_nearly_every_exact_best_match():
    rng = np.random.default_rng(0)
    centres = unit_rows(rng, 40, 32)
    items = centres[rng.integers(0, 40, 20_000)] + 0.3 * unit_rows(rng, 20_000, 32)
    queries = centres[rng.integers(0, 40, 500)] + 0.3 * unit_rows(rng, 500, 32)
    items /= np.linalg.norm(items, axis=1, keepdims=True)
    assert nearest.index_for(len(items), len(queries), exact_up_to=0).nprobe < round(20_000**0.5)
    found, _ = top_inner(items, queries, 4, exact_up_to=0)
    exact, _ = top_inner(items, queries, 4)
    recall = np.mean([len(set(a) & set(b)) / 4 for a, b in zip(found, exact)])
    assert recall >= 0.9, recall

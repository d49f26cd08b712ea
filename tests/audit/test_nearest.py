"""The audit's best matches through FAISS against the brute-force reference (``matches_of`` over the
full similarity matrix) on random vectors: the same top captions and images, scores, pair scores
and counts of better images, in the pools or not, the counts read in tiles of any size, the
captions matched a block at a time; above the exact limit, an IVF probing every cell gives the
same matches and the counts capped."""

import numpy as np
import pytest

import mispair.audit.nearest as nearest
from mispair.audit.nearest import ImageMatcher, ItemIndex, count_above, index_for, paired_inner
from mispair.audit.ranking import SUGGESTIONS, matches_of, suggestion_pools

pytest.importorskip("faiss")


def top_inner(items, queries, k, pool=None, exact_up_to=nearest.EXACT_PRODUCTS):
    """Each query's ``k`` best items of the pool (None: all) through an :class:`ItemIndex`."""
    chosen = np.arange(len(items)) if pool is None else np.flatnonzero(pool)
    index = ItemIndex.of(items, chosen, index_for(len(chosen), len(queries), exact_up_to))
    return index.search(queries, k)


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def brute_force(images, captions, image_of_caption, pools, k=SUGGESTIONS + 1):
    """The reference: ``matches_of`` over the full similarity matrix, 16 images at a time."""
    sims = images @ captions.T
    paired = sims[image_of_caption, np.arange(len(captions))]
    return matches_of(
        lambda rows: sims[rows],
        len(images),
        image_of_caption,
        paired,
        chunk=16,
        k=k,
        captions_pool=pools[0],
        images_pool=pools[1],
    )


@pytest.mark.parametrize("tile", [5, 1 << 22])
@pytest.mark.parametrize("suspects", [False, True])
@pytest.mark.parametrize("shape", [(40, 200), (3, 7), (60, 60)])
def test_faiss_best_matches_equal_the_brute_force_ones(shape, suspects, tile, monkeypatch):
    monkeypatch.setattr(nearest, "TILE", tile)
    rng = np.random.default_rng(sum(shape) + suspects)
    n_images, n_captions = shape
    images, captions = unit_rows(rng, n_images, 24), unit_rows(rng, n_captions, 24)
    image_of_caption = np.sort(rng.integers(0, n_images, n_captions))
    pools = (None, None)
    if suspects:
        pools = suggestion_pools(rng.random(n_captions) < 0.4, image_of_caption, n_images)
    k = SUGGESTIONS + 1
    want = brute_force(images, captions, image_of_caption, pools, k)
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


@pytest.mark.parametrize("block", [7, 1 << 16])
@pytest.mark.parametrize("exact_up_to", [nearest.EXACT_PRODUCTS, 0])
@pytest.mark.parametrize("suspects", [False, True])
def test_the_image_matcher_a_block_of_captions_at_a_time_equals_the_brute_force_matches(
    suspects, exact_up_to, block, monkeypatch
):
    """Exact, and an IVF (√150 ≈ 12 cells, all probed): the same best images among the pool
    (captions with too few of the pool in their depth-101 search searched again among the pool
    only), the same counts (capped above the limit); the pool's captions added block by block to
    an :class:`ItemIndex` give each image's best captions."""
    monkeypatch.setattr(nearest, "BLOCK", block)
    monkeypatch.setattr(nearest, "COUNT_DEPTH", 10)  # some counts pass the cap
    rng = np.random.default_rng(7 + suspects)
    images, captions = unit_rows(rng, 150, 16), unit_rows(rng, 90, 16)
    image_of_caption = rng.integers(0, 150, 90)
    pools = (None, None)
    if suspects:  # 8 of 150 images: most captions find fewer than 4 of them in their best 11
        pools = (rng.random(90) < 0.3, np.isin(np.arange(150), rng.choice(150, 8, replace=False)))
    want = brute_force(images, captions, image_of_caption, pools)
    matcher = ImageMatcher.of(images, 90, SUGGESTIONS + 1, pools[1], exact_up_to=exact_up_to)
    assert matcher.exact == (exact_up_to > 0)
    assert (matcher.images is None) == (not matcher.exact)  # above the limit the IVF keeps the only copy
    np.testing.assert_array_equal(matcher.vectors(np.arange(150)[::-1]), images[::-1])  # read back exactly
    pair_score = paired_inner(matcher.vectors, captions, image_of_caption)
    np.testing.assert_array_equal(pair_score, paired_inner(images, captions, image_of_caption))
    found = [
        matcher.match(captions[rows], image_of_caption[rows], pair_score[rows])
        for rows in (slice(start, start + block) for start in range(0, 90, block))
    ]
    ids, scores, better = ([part[n] for part in found] for n in range(3))
    np.testing.assert_array_equal(np.concatenate(ids), want.images)
    np.testing.assert_allclose(np.concatenate(scores), want.image_scores, rtol=1e-5, atol=1e-6)
    cap = None if matcher.exact else 10
    np.testing.assert_array_equal(np.concatenate(better), np.minimum(want.better_images, cap or 10**9))
    pool = np.arange(90) if pools[0] is None else np.flatnonzero(pools[0])
    spec = nearest.index_for(len(pool), 150, exact_up_to)
    index = ItemIndex(spec, captions[nearest.training_sample(pool, spec)], len(pool))
    for start in range(0, 90, block):
        chosen = pool[(pool >= start) & (pool < start + block)]
        index.add(captions[chosen], chosen)
    best_captions, caption_scores = index.search(images, SUGGESTIONS + 1)
    np.testing.assert_array_equal(best_captions, want.captions)
    np.testing.assert_allclose(caption_scores, want.caption_scores, rtol=1e-5, atol=1e-6)


def test_an_item_index_searched_among_some_ids_finds_only_those():
    rng = np.random.default_rng(3)
    items, queries = unit_rows(rng, 50, 8), unit_rows(rng, 6, 8)
    ids = np.arange(0, 100, 2)  # the items are the collection's even rows
    index = ItemIndex(nearest.IndexSpec(), items[:1], 50)
    index.add(items[:20], ids[:20])
    index.add(items[20:], ids[20:])
    among = np.array([4, 10, 98])
    found, scores = index.search(queries, 5, among=among)
    sims = queries @ items[among // 2].T
    order = np.argsort(-sims, axis=1)
    np.testing.assert_array_equal(found[:, :3], among[order])
    assert (found[:, 3:] == -1).all() and np.isnan(scores[:, 3:]).all()


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

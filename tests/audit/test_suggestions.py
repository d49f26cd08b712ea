"""The audit's suggestions and its reasons in words, against a brute-force search of a small
similarity matrix: read in chunks of any size, the same top captions and images, each pair's own
caption and image left out."""

import numpy as np
import pytest

from mispair.audit import ranking
from mispair.audit.ranking import SUGGESTIONS, matches_of, others, suggestion_pools
from mispair.audit.words import why


def brute_force(sims: np.ndarray, image_of_caption: np.ndarray, k: int, captions_pool=None, images_pool=None):
    """Per pair: its image's best other captions and its caption's best other images, chosen in
    the pools (loops)."""
    captions, images, better = [], [], []
    in_captions = range(sims.shape[1]) if captions_pool is None else np.flatnonzero(captions_pool)
    in_images = range(sims.shape[0]) if images_pool is None else np.flatnonzero(images_pool)
    for c, own in enumerate(image_of_caption):
        ranked = sorted(in_captions, key=lambda j: -sims[own, j])
        captions.append([j for j in ranked if j != c][:k])
        ranked = sorted(in_images, key=lambda i: -sims[i, c])
        images.append([i for i in ranked if i != own][:k])
        better.append(sum(1 for i in range(sims.shape[0]) if i != own and sims[i, c] > sims[own, c]))
    return captions, images, better


@pytest.mark.parametrize("suspects", [False, True])
@pytest.mark.parametrize("chunk", [1, 3, 7, 100])
@pytest.mark.parametrize("shape", [(9, 20), (30, 30), (3, 5)])
def test_suggestions_are_the_brute_force_best_other_matches(chunk, shape, suspects):
    rng = np.random.default_rng(sum(shape) + chunk)
    n_images, n_captions = shape
    sims = rng.normal(size=shape).astype(np.float32)
    image_of_caption = np.sort(rng.integers(0, n_images, n_captions))
    paired = sims[image_of_caption, np.arange(n_captions)]
    captions_pool, images_pool = None, None
    if suspects:
        captions_pool, images_pool = suggestion_pools(
            rng.random(n_captions) < 0.5, image_of_caption, n_images
        )
    matches = matches_of(
        lambda rows: sims[rows],
        n_images,
        image_of_caption,
        paired,
        chunk=chunk,
        captions_pool=captions_pool,
        images_pool=images_pool,
    )
    captions, scores = others(
        matches.captions[image_of_caption], matches.caption_scores[image_of_caption], np.arange(n_captions)
    )
    images, image_scores = others(matches.images, matches.image_scores, image_of_caption)
    want_captions, want_images, want_better = brute_force(
        sims, image_of_caption, SUGGESTIONS, captions_pool, images_pool
    )
    for c in range(n_captions):
        got = [j for j in captions[c] if j >= 0]
        assert got == want_captions[c]
        np.testing.assert_allclose(scores[c][: len(got)], sims[image_of_caption[c], got])
        assert np.isnan(scores[c][len(got) :]).all()
        got = [i for i in images[c] if i >= 0]
        assert got == want_images[c]
        np.testing.assert_allclose(image_scores[c][: len(got)], sims[got, c])
    assert matches.better_images.tolist() == want_better
    np.testing.assert_array_equal(matches.pair_score, paired)


def test_why_says_how_many_images_fit_better_and_the_caption_the_image_fits():
    assert (
        why(37, "red apple", True)
        == "this caption fits 37 other images better; this image fits 'red apple' best"
    )
    assert why(1, "red apple", False) == (
        "this caption fits 1 other image better; no other caption fits this image better"
    )
    assert why(0, None, False).startswith("no other image fits this caption better")
    assert why(2, "x" * 100, True).endswith("'" + "x" * 59 + "…' best")
    assert "of the suspect captions, this image fits 'red apple' best" in why(
        3, "red apple", True, among_suspects=True
    )


def test_suggestions_come_from_the_suspects_only_when_there_are_enough():
    image_of_caption = np.array([0, 0, 1, 2, 3, 4, 5])
    captions, images = suggestion_pools(np.array([1, 1, 1, 1, 0, 0, 0], bool), image_of_caption, 6)
    assert captions.tolist() == [1, 1, 1, 1, 0, 0, 0] and images is None  # 3 suspect images: too few
    captions, images = suggestion_pools(np.array([0, 1, 1, 1, 1, 0, 0], bool), image_of_caption, 6)
    assert images.tolist() == [1, 1, 1, 1, 0, 0]


def test_why_says_at_least_where_the_count_is_capped():
    assert why(100, None, False, at_least=True).startswith(
        "this caption fits at least 100 other images better"
    )


def test_a_pair_is_explained_from_its_calibrated_probability():
    """A correct pair with a middling score reads as uncertain, not as the images its caption
    fits better; a likely mismatch keeps that explanation after its probability."""
    middling = why(155, "red apple", True, probability=0.3)
    assert middling == (
        "uncertain: scores between matched pairs and captions of other pictures (mismatch probability 0.30)"
    )
    likely = why(155, "red apple", True, probability=0.97, leak=True)
    assert likely.startswith("scores like a caption taken from another picture (mismatch probability 0.97); ")
    assert "this caption fits 155 other images better" in likely and likely.endswith("a leak)")
    assert why(0, None, False, probability=0.01).startswith(
        "scores like a matched pair (mismatch probability 0.01)"
    )
    assert why(2, None, False, probability=0.6, same_caption=1).endswith(
        "1 other image carries the same caption"
    )


@pytest.mark.parametrize("suspects", [False, True])
@pytest.mark.parametrize("tile", [1, 7, 64])
def test_the_matches_ranked_in_tiles_are_those_of_the_whole_chunk(monkeypatch, tile, suspects):
    """Ranked and counted a few entries at a time (RANK_TILE), every index, score and count equals
    one tile's, ties included (few distinct similarities)."""
    rng = np.random.default_rng(tile)
    n_images, n_captions = 23, 61
    sims = (rng.integers(0, 4, size=(n_images, n_captions)) / 4).astype(np.float32)
    image_of_caption = rng.integers(0, n_images, n_captions)
    paired = sims[image_of_caption, np.arange(n_captions)] + rng.choice([0, 0.25], n_captions).astype(
        np.float32
    )
    pools = (None, None)
    if suspects:
        pools = suggestion_pools(rng.random(n_captions) < 0.5, image_of_caption, n_images)

    def matches():
        return matches_of(
            lambda rows: sims[rows],
            n_images,
            image_of_caption,
            paired,
            chunk=10,
            captions_pool=pools[0],
            images_pool=pools[1],
        )

    whole = matches()
    monkeypatch.setattr(ranking, "RANK_TILE", tile)
    tiled = matches()
    for name in ("captions", "caption_scores", "images", "image_scores", "pair_score", "better_images"):
        np.testing.assert_array_equal(getattr(tiled, name), getattr(whole, name))

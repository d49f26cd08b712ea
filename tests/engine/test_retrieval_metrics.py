"""retrieval_metrics against a brute-force loop, including ties, 1/5 captions and 5 folds, its
queries ranked in blocks of any size."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mispair.engine.metrics as metrics
from mispair import retrieval_metrics
from mispair.engine.metrics import streamed_retrieval_metrics
from mispair.errors import DataError


def _rank(scores, correct):
    """Position of the best correct candidate after sorting, ties placed against the truth."""
    order = sorted(range(len(scores)), key=lambda j: (-scores[j], correct[j]))
    return next(pos for pos, j in enumerate(order) if correct[j])


def brute_force(sims, per_image, groups=None):
    n_images, n_captions = sims.shape
    owner = [k // per_image for k in range(n_captions)]

    def is_correct(i, k):
        if groups is None:
            return owner[k] == i
        return groups[k] in {groups[c] for c in range(n_captions) if owner[c] == i}

    i2t = [_rank(sims[i], [is_correct(i, k) for k in range(n_captions)]) for i in range(n_images)]
    t2i = [_rank(sims[:, k], [is_correct(i, k) for i in range(n_images)]) for k in range(n_captions)]
    out = {}
    for name, ranks in (("i2t", np.array(i2t)), ("t2i", np.array(t2i))):
        for k in (1, 5, 10):
            out[f"{name}_r{k}"] = 100 * np.mean(ranks < k)
        out[f"{name}_medr"] = np.floor(np.median(ranks)) + 1
        out[f"{name}_meanr"] = ranks.mean() + 1
    out["rsum"] = sum(out[f"{d}_r{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10))
    return out


def _close(a, b):
    assert set(a) == set(b)
    for key in a:
        assert a[key] == pytest.approx(b[key], abs=1e-9), key


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 12), st.sampled_from([1, 5]), st.integers(0, 10_000), st.booleans())
def test_matches_brute_force(n_images, per_image, seed, ties):
    rng = np.random.default_rng(seed)
    shape = (n_images, n_images * per_image)
    sims = rng.integers(0, 3, shape).astype(float) if ties else rng.normal(size=shape)
    _close(retrieval_metrics(sims, per_image), brute_force(sims, per_image))


def test_five_folds_average_the_folds():
    rng = np.random.default_rng(0)
    sims = rng.normal(size=(50, 250)) + np.repeat(np.eye(50), 5, axis=1)
    folds = [brute_force(sims[f * 10 : (f + 1) * 10, f * 50 : (f + 1) * 50], 5) for f in range(5)]
    expected = {k: np.mean([f[k] for f in folds]) for k in folds[0]}
    _close(retrieval_metrics(sims, 5, folds=5), expected)


def test_equivalent_caption_recall_matches_brute_force():
    rng = np.random.default_rng(1)
    sims = rng.normal(size=(20, 20))
    groups = rng.integers(0, 8, 20)
    got = retrieval_metrics(sims, 1, caption_groups=groups)
    _close(got, brute_force(sims, 1, groups))
    assert got["rsum"] >= retrieval_metrics(sims, 1)["rsum"]


def test_constant_scores_earn_no_recall_and_perfect_scores_all():
    assert retrieval_metrics(np.zeros((30, 150)), 5)["rsum"] == 0
    assert retrieval_metrics(np.repeat(np.eye(30), 5, axis=1), 5)["rsum"] == 600


def test_bad_shapes_are_user_errors():
    with pytest.raises(DataError, match="expected 5 per image"):
        retrieval_metrics(np.zeros((4, 7)), 5)
    with pytest.raises(DataError, match="folds"):
        retrieval_metrics(np.zeros((6, 6)), 1, folds=4)
    with pytest.raises(DataError, match="must be"):
        retrieval_metrics(np.zeros(6), 1)
    with pytest.raises(DataError, match="caption_groups"):
        retrieval_metrics(np.zeros((4, 4)), 1, caption_groups=np.arange(6))


def test_any_number_of_captions_per_image_ranks_as_a_brute_force_loop():
    """Caption ``k`` of image ``owner[k]``, 1–3 captions an image: each image's rank is that of its
    best own caption, each caption's that of its image (ties against the truth)."""
    rng = np.random.default_rng(4)
    owner = np.array([0, 0, 1, 2, 2, 2, 3, 4, 4])
    sims = rng.normal(size=(5, len(owner))).round(1)  # ties happen
    got = retrieval_metrics(sims, image_of_caption=owner)
    i2t = [
        sum(sims[i, c] >= max(sims[i, owner == i]) for c in range(len(owner)) if owner[c] != i)
        for i in range(5)
    ]
    t2i = [sum(sims[j, k] >= sims[owner[k], k] for j in range(5) if j != owner[k]) for k in range(len(owner))]
    for name, ranks in (("i2t", i2t), ("t2i", t2i)):
        for k in (1, 5, 10):
            assert got[f"{name}_r{k}"] == pytest.approx(100 * np.mean(np.array(ranks) < k))
    uniform = np.repeat(np.arange(5), 2)  # the standard layout gives the standard metrics
    sims = rng.normal(size=(5, 10))
    assert retrieval_metrics(sims, image_of_caption=uniform) == retrieval_metrics(sims, captions_per_image=2)


@pytest.mark.parametrize("tile", [1, 7, 64])
def test_queries_ranked_a_few_at_a_time_rank_as_the_brute_force_loop(tile, monkeypatch):
    monkeypatch.setattr(metrics, "TILE", tile)  # 1 query a block, a few, several
    rng = np.random.default_rng(tile)
    sims = rng.integers(0, 4, (9, 45)).astype(float)  # many ties
    _close(retrieval_metrics(sims, 5), brute_force(sims, 5))
    groups = rng.integers(0, 12, 45) * 3 - 7  # labels of any value
    _close(retrieval_metrics(sims, 5, caption_groups=groups), brute_force(sims, 5, groups))


@pytest.mark.parametrize("tile", [1, 45, 1 << 24])
def test_metrics_streamed_from_blocks_of_rows_equal_those_of_the_whole_matrix(tile, monkeypatch):
    """Each block of images asked for twice (once per pass), never more rows than the tile
    allows; the metrics those of the matrix: 5 folds, caption groups, any captions per image."""
    monkeypatch.setattr(metrics, "STREAM_TILE", tile)
    rng = np.random.default_rng(tile)
    sims = rng.integers(0, 4, (10, 50)).astype(np.float32)  # many ties
    asked = []

    def block(rows, cols):
        asked.append((rows.start, rows.stop, cols.start, cols.stop))
        return sims[rows, cols]

    for folds in (1, 5):
        asked.clear()
        got = streamed_retrieval_metrics(block, 10, 50, 5, folds)
        assert got == pytest.approx(retrieval_metrics(sims, 5, folds), abs=1e-9)
        assert set(Counter(asked).values()) == {2}  # each block once per pass
        rows_per_block = max(1, min(10 // folds, tile // (50 // folds)))
        assert max(stop - start for start, stop, _, _ in asked) == rows_per_block
    groups = rng.integers(0, 9, 50)
    want = retrieval_metrics(sims, 5, caption_groups=groups)
    got = streamed_retrieval_metrics(block, 10, 50, 5, caption_groups=groups)
    assert got == pytest.approx(want, abs=1e-9)
    owner = np.sort(rng.integers(0, 10, 50))
    want = retrieval_metrics(sims, image_of_caption=owner)
    assert streamed_retrieval_metrics(block, 10, 50, image_of_caption=owner) == pytest.approx(want, abs=1e-9)
    with pytest.raises(DataError, match="expected 5 per image"):
        streamed_retrieval_metrics(block, 10, 49, 5)

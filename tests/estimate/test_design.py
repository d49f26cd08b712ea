"""The sample design's schedule: at every answer count it is the allocation that minimises the
planned look's predicted variance (checked against an exhaustive search over every integer
allocation), its prefixes nest, and the cut gets its early share."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mispair.estimate.design import (
    CUT_CHECK,
    CUT_SHARE,
    predicted_variance,
    schedule,
    strata_of,
    stratified_order,
    stratum_means,
)


def predicted(allotted: tuple[int, ...], sizes: tuple[int, ...], means: tuple[float, ...]) -> float:
    total = sum(sizes)
    return sum(
        (size / total) ** 2 * predicted_variance(size, mean, n)
        for size, mean, n in zip(sizes, means, allotted)
    )


def best_by_search(n: int, sizes: tuple[int, ...], means: tuple[float, ...]) -> float:
    """The least predicted variance over every allocation of ``n`` answers (at least one each)."""
    best = math.inf
    for cuts in itertools.combinations(range(1, n), len(sizes) - 1):
        allotted = tuple(b - a for a, b in zip((0, *cuts), (*cuts, n)))
        if all(k <= size for k, size in zip(allotted, sizes)):
            best = min(best, predicted(allotted, sizes, means))
    return best


@pytest.mark.parametrize(
    "sizes, means",
    [
        ((40, 90, 300, 600), (0.6, 0.3, 0.1, 0.01)),
        ((12, 25, 500), (0.5, 0.05, 0.002)),
        ((8, 8, 8), (0.5, 0.5, 0.9)),
    ],
)
def test_every_prefix_is_the_least_predicted_variance_of_its_size(sizes, means):
    names = ("likely", "edge", "low", "rest")[4 - len(sizes) :]
    plan = schedule(dict(zip(names, sizes)), dict(zip(names, means)))
    for n in range(len(sizes), min(sum(sizes), 45)):
        allotted = tuple(int((plan[:n] == name).sum()) for name in names)
        assert predicted(allotted, sizes, means) == pytest.approx(best_by_search(n, sizes, means), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    mean=st.floats(0.0, 1.0),
    pairs=st.integers(3, 400),
)
def test_the_predicted_variance_falls_and_is_convex_in_the_answers(mean, pairs):
    values = [predicted_variance(pairs, mean, n) for n in range(1, pairs + 1)]
    steps = np.diff(values)
    assert (steps <= 1e-15).all()
    assert (np.diff(steps) >= -1e-15).all()  # so the greedy order is exact (Wright 2017)


def test_the_cut_gets_its_early_share_and_every_stratum_is_drawn_uniformly():
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.uniform(0.8, 1.0, 120), rng.beta(1, 20, 2000)])
    strata = strata_of(p, p > 0.8)
    plan = schedule({h: int((strata == h).sum()) for h in set(strata)}, stratum_means(p, strata))
    in_cut = np.cumsum(plan == "cut")
    first = int(np.argmax(in_cut >= CUT_CHECK)) + 1
    assert in_cut[first - 1] == CUT_CHECK and all(
        in_cut[t - 1] >= math.floor(CUT_SHARE * t) for t in range(1, first)
    )
    assert {h: int((plan == h).sum()) for h in set(plan)} == {
        h: int((strata == h).sum()) for h in set(strata)
    }
    ids = [str(i) for i in range(len(p))]
    firsts = [
        stratified_order(ids, strata, stratum_means(p, strata), np.random.default_rng(s))[0]
        for s in range(400)
    ]
    assert len(set(firsts)) > 105  # a uniform draw among its 120 pairs: about 116 distinct in 400 draws
    assert set(strata[firsts]) == {"cut"}

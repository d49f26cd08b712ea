"""The share's estimate from a judged sample (:mod:`mispair.estimate.share`): the fixed-n
interval equals ``ppi-python``'s on the same inputs; the anytime interval equals the formula
written out with the two pseudo-answers as arrays; it is never wider than the labels-only one;
the stratified estimate of the design equals its definition written out, and over many
stratified orders of a population with a known truth it is unbiased and holds the truth at every
n at once in at least 95% of the orders; unsure answers widen it to both readings."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mispair.estimate.design import predicted_variance
from mispair.estimate.sample import sample_order
from mispair.estimate.share import (
    ALPHA,
    LOOK_ALPHA,
    PLANNED_FOR,
    Z_975,
    Z_LOOK,
    answers_for,
    anytime_share,
    boundary,
    fixed_n_share,
    labels_only_share,
    planned_look,
    predicted_half_width,
    sample_share,
    stratified_share,
    without_replacement,
)

ppi = pytest.importorskip("ppi_py")


def population(n: int, share: float, separation: float, seed: int):
    """A population's truth and probabilities (a scorer of roughly the given quality)."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(n) < share).astype(float)
    logit = rng.normal(separation * (2 * truth - 1), 1.0)
    return truth, 1 / (1 + np.exp(-logit))


@pytest.mark.parametrize("n, seed", [(20, 0), (100, 1), (300, 2), (57, 3)])
def test_the_fixed_n_interval_is_ppi_pythons(n, seed):
    truth, p = population(2000, 0.3, 1.5, seed)
    order = np.random.default_rng(seed).permutation(len(truth))[:n]
    mine = fixed_n_share(truth[order], p[order], p)
    low, high = ppi.ppi_mean_ci(truth[order], p[order], p, alpha=ALPHA)
    point = ppi.ppi_mean_pointestimate(truth[order], p[order], p)
    assert mine.share == pytest.approx(float(np.squeeze(point)), abs=1e-12)
    assert mine.low == pytest.approx(max(float(np.squeeze(low)), 0), abs=1e-12)
    assert mine.high == pytest.approx(min(float(np.squeeze(high)), 1), abs=1e-12)


def written_out(y, f, mean_f, power=True):
    """The anytime interval from arrays: the answers with a correct and a mismatched
    pseudo-answer predicted at the mean, λ the least-variance weight in [0, 1]."""
    ya, fa = np.append(y, [0.0, 1.0]), np.append(f, [mean_f, mean_f])
    lam = 0.0
    if power and np.var(fa) > 0:
        lam = float(np.clip(np.cov(ya, fa, ddof=1)[0, 1] / np.var(fa, ddof=1), 0, 1))
    variance = np.var(ya - lam * fa, ddof=1)
    share = lam * mean_f + np.mean(y - lam * f)
    n, a = len(y), ALPHA
    rho2 = (-2 * math.log(a) + math.log(-2 * math.log(a) + 1)) / 100
    half = math.sqrt(variance) * math.sqrt(
        2 * (n * rho2 + 1) / (n * n * rho2) * math.log(math.sqrt(n * rho2 + 1) / a)
    )
    return share, max(share - half, 0), min(share + half, 1)


@given(
    st.integers(2, 200),
    st.floats(0.0, 1.0),
    st.floats(-1.0, 4.0),
    st.integers(0, 10_000),
)
@settings(max_examples=60, deadline=None)
def test_the_anytime_interval_is_its_formula_and_never_wider_than_the_labels_alone(
    n, share, separation, seed
):
    truth, p = population(500, share, separation, seed)
    order = np.random.default_rng(seed).permutation(len(truth))[:n]
    y, f = truth[order], p[order]
    found = anytime_share(y, f, float(p.mean()))
    assert (found.share, found.low, found.high) == pytest.approx(written_out(y, f, float(p.mean())), abs=1e-9)
    alone = labels_only_share(y, float(p.mean()))
    assert (alone.share, alone.low, alone.high) == pytest.approx(
        written_out(y, f, float(p.mean()), power=False), abs=1e-9
    )
    assert (
        found.std <= alone.std + 1e-12
    )  # the least-variance weight: never wider than λ = 0 (before clipping)


def test_over_random_orders_it_is_unbiased_and_holds_the_truth_at_every_n_at_once():
    truth, p = population(3000, 0.25, 1.2, 7)
    rng, held, estimates = np.random.default_rng(0), 0, []
    sizes = np.unique(np.geomspace(10, 600, 25).astype(int))
    for _ in range(300):
        order = rng.permutation(len(truth))
        every = [anytime_share(truth[order[:n]], p[order[:n]], float(p.mean())) for n in sizes]
        held += all(e.low <= truth.mean() <= e.high for e in every)  # at every n together
        estimates.append(every[-1].share)
    assert held / 300 >= 0.95
    assert np.mean(estimates) == pytest.approx(truth.mean(), abs=0.005)  # unbiased (sd of the mean ~0.001)


def design(n: int, share: float, separation: float, seed: int):
    """A population in the stratified order of the audit's design: its truth, probabilities and
    strata, each in sample order."""
    truth, p = population(n, share, separation, seed)
    sample = sample_order([str(i) for i in range(n)], seed, p, p > 0.8)
    at = sample["pair_id"].astype(int).to_numpy()
    return truth[at], p[at], sample["stratum"].to_numpy()


def test_unsure_answers_bound_the_interval_either_way_and_keep_their_place():
    truth, p, strata = design(1000, 0.3, 1.5, 3)
    answers = truth[:80].copy()
    answers[[4, 17, 33]] = np.nan
    found = sample_share(answers, p, strata)
    as_correct, _ = stratified_share(np.nan_to_num(answers, nan=0.0), p, strata)
    as_mismatched, _ = stratified_share(np.nan_to_num(answers, nan=1.0), p, strata)
    assert found.estimate.low == min(as_correct.low, as_mismatched.low)
    assert found.estimate.high == max(as_correct.high, as_mismatched.high)
    assert found.estimate.share == pytest.approx((as_correct.share + as_mismatched.share) / 2)
    assert (found.answers, found.unsure, found.mismatched + found.correct) == (80, 3, 77)
    firm = sample_share(np.nan_to_num(answers, nan=0.0), p, strata)
    assert found.estimate.high - found.estimate.low > firm.estimate.high - firm.estimate.low


def brute_stratified(y, p, strata):
    """The stratified estimate written out from its definition: per stratum the mean and
    Agresti–Coull's variance, κ from the harmonic sum, the weights N_h / N."""
    n, big = len(y), len(p)
    share, variance, fixed = 0.0, 0.0, 0.0
    for name in set(strata):
        inside = strata == name
        answered = y[inside[:n]]
        N_h, n_h = int(inside.sum()), len(answered)
        weight = N_h / big
        if n_h == 0:
            share += weight * p[inside].mean()
            continue
        share += weight * answered.mean()
        if n_h < N_h:
            tilde = (answered.sum() + 1) / (n_h + 2)
            kappa = n_h / sum(N_h / (N_h - i + 1) for i in range(1, n_h + 1))
            variance += weight**2 * kappa**2 * tilde * (1 - tilde) / n_h
            fixed += weight**2 * (1 - n_h / N_h) * tilde * (1 - tilde) / n_h
    return share, variance, fixed


@pytest.mark.parametrize("n, seed", [(5, 0), (60, 1), (250, 2), (999, 3)])
def test_the_stratified_estimate_is_its_definition(n, seed):
    truth, p, strata = design(1000, 0.25, 1.5, seed)
    share, variance, fixed = brute_stratified(truth[:n], p, strata)
    anytime, fixed_n = stratified_share(truth[:n], p, strata)
    assert anytime.share == pytest.approx(share, abs=1e-12)
    look = planned_look(p, strata)
    half = math.sqrt(variance * n) * boundary(n, ALPHA - LOOK_ALPHA)
    low, high = anytime.share - half, anytime.share + half
    if n >= look:
        then, _, then_fixed = brute_stratified(truth[:look], p, strata)
        low, high = (
            max(low, then - Z_LOOK * math.sqrt(then_fixed)),
            min(high, then + Z_LOOK * math.sqrt(then_fixed)),
        )
    if all(name in strata[:n] for name in set(strata)):
        assert (anytime.low, anytime.high) == pytest.approx((max(low, 0), min(high, 1)), abs=1e-12)
        expected = (share - Z_975 * math.sqrt(fixed), share + Z_975 * math.sqrt(fixed))
        assert (fixed_n.low, fixed_n.high) == pytest.approx(
            (max(expected[0], 0), min(expected[1], 1)), abs=1e-12
        )
    else:  # a stratum without answers: its weight on the high end
        assert anytime.high >= anytime.share


def test_without_replacement_is_the_harmonic_ratio_and_never_narrower_than_the_finite_correction():
    for big in (10, 347, 2000):
        for n in range(1, big, max(big // 17, 1)):
            kappa = without_replacement(n, big)
            assert kappa == pytest.approx(n / (big * sum(1 / j for j in range(big - n + 1, big + 1))))
            assert 1 - n / big <= kappa**2 <= 1


def test_over_stratified_orders_it_is_unbiased_and_holds_the_truth_at_every_n_at_once():
    truth, p = population(1000, 0.25, 1.2, 7)
    ids = [str(i) for i in range(len(truth))]
    sizes = np.unique(np.geomspace(10, 500, 10).astype(int))
    held, estimates, runs = 0, [], 150
    for seed in range(runs):
        sample = sample_order(ids, seed, p, p > 0.85)
        at, strata = sample["pair_id"].astype(int).to_numpy(), sample["stratum"].to_numpy()
        every = [stratified_share(truth[at[:n]], p[at], strata)[0] for n in sizes]
        held += all(e.low <= truth.mean() <= e.high for e in every)
        estimates.append(every[-1].share)
    assert held / runs >= 0.95
    assert np.mean(estimates) == pytest.approx(truth.mean(), abs=0.005)


def test_the_answers_to_a_target_are_the_fewest_that_reach_it():
    for std in (0.05, 0.2, 0.45):
        for start in (1, 30, 200):
            found = answers_for(std, 0.03, start, 100_000)
            scan = next(n for n in range(start, 100_001) if std * boundary(n) <= 0.03)
            assert found == scan
    assert answers_for(0.45, 0.03, 10, 500) is None  # not within the collection's pairs
    assert all(boundary(t) > boundary(t + 1) for t in range(1, 3000))


def test_every_pair_judged_is_the_share_itself_bounded_only_by_the_unsure():
    truth, p, strata = design(50, 0.3, 1.0, 4)
    answers = truth.copy()
    answers[[3, 9]] = np.nan
    found = sample_share(answers, p, strata)
    firm = truth.copy()
    firm[[3, 9]] = 0
    assert (found.estimate.low, found.estimate.high) == pytest.approx((firm.mean(), firm.mean() + 2 / 50))
    assert found.labels_only == found.estimate


def test_no_answer_is_the_whole_range():
    found = sample_share(np.array([]), np.array([0.2, 0.4]), np.array(["all", "all"], dtype=object))
    assert (found.estimate.low, found.estimate.high, found.answers) == (0.0, 1.0, 0)


def test_the_look_is_promised_only_while_the_answers_agree_with_the_scores():
    """Scores that call every pair a sure match plan an early look; answers that find 40% of the
    pairs mismatched predict that look far wider than ± 3 points (the share's deviation is the
    answers', not the scores'), so the count falls back to the confidence sequence's."""
    f = np.full(2000, 0.01)
    strata = np.array(["low"] * 400 + ["rest"] * 1600, dtype=object)
    order = np.random.default_rng(0).permutation(2000)
    f, strata = f[order], strata[order]
    look = planned_look(f, strata)
    agree = np.zeros(50)
    found = sample_share(agree, f, strata)
    assert found.answers_for_target == look
    assert predicted_half_width(look, f, strata, Z_LOOK, agree) <= PLANNED_FOR
    disagree = (np.arange(50) % 5 < 2).astype(float)  # 40% mismatched
    wide = predicted_half_width(look, f, strata, Z_LOOK, disagree)
    by_hand = Z_LOOK * math.sqrt(
        sum(
            (big / 2000) ** 2
            * predicted_variance(
                big, disagree[(strata == name)[:50]].mean(), int((strata[:look] == name).sum())
            )
            for name, big in (("low", 400), ("rest", 1600))
        )
    )
    assert wide == pytest.approx(by_hand, rel=1e-12) and wide > PLANNED_FOR
    assert sample_share(disagree, f, strata).answers_for_target != look

"""The labelled drop (:mod:`mispair.estimate.selection`): conformal p-values equal a loop over
the judged pairs, Benjamini–Hochberg equals statsmodels', and over many random samples of a
population with a known truth the realized false-discovery rate stays within the level on
average (Jin & Candès 2023, Thm 2.3), even with a scorer that ranks badly."""

import numpy as np
import pytest

from mispair.estimate.selection import (
    benjamini_hochberg,
    conformal_selection,
    correct_lower,
    correct_upper,
    hypergeometric_cdf,
    platt,
    proven_cut,
    recalibrated,
)

multitest = pytest.importorskip("statsmodels.stats.multitest")


def test_p_values_are_the_count_of_judged_correct_pairs_scoring_at_least_as_high():
    rng = np.random.default_rng(0)
    score = rng.random(300)
    answers = np.full(300, np.nan)
    judged = rng.choice(300, 60, replace=False)
    answers[judged] = rng.choice([0.0, 1.0, 0.5], size=60, p=[0.6, 0.3, 0.1])
    found = conformal_selection(score, answers, 0.1)
    nulls = [i for i in judged if answers[i] < 1]  # correct or unsure
    for j in range(300):
        loop = (1 + sum(score[i] >= score[j] for i in nulls)) / (60 + 1)
        assert found.p_values[j] == pytest.approx(loop)
    assert found.suspected[judged[answers[judged] == 1]].all()  # judged mismatched: dropped
    assert not found.suspected[judged[answers[judged] < 1]].any()  # judged correct or unsure: kept


@pytest.mark.parametrize("level", [0.05, 0.1, 0.2])
def test_benjamini_hochberg_is_statsmodels(level):
    p = np.random.default_rng(1).beta(0.4, 2.0, size=500)
    assert np.array_equal(benjamini_hochberg(p, level), multitest.multipletests(p, level, method="fdr_bh")[0])


@pytest.mark.parametrize("separation", [2.0, 0.5])
def test_the_realized_false_discovery_rate_is_within_the_level_on_average(separation):
    rng = np.random.default_rng(2)
    truth = rng.random(2000) < 0.3
    score = rng.normal(separation * truth, 1.0)
    rates = []
    for _ in range(300):
        answers = np.full(2000, np.nan)
        judged = rng.choice(2000, 150, replace=False)
        answers[judged] = truth[judged]
        chosen = conformal_selection(score, answers, 0.1).suspected
        rates.append(1 - truth[chosen].mean() if chosen.any() else 0.0)
    assert np.mean(rates) <= 0.1 + 0.01  # the standard error of the mean of 300 rates is < 0.005


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_platt_scaling_is_scikit_learns_logistic_regression(seed):
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(seed)
    x = rng.normal(size=300)
    y = (rng.random(300) < 1 / (1 + np.exp(-(1.7 * x - 0.4)))).astype(float)
    model = LogisticRegression(C=1e4).fit(x.reshape(-1, 1), y.astype(int))
    a, b = platt(x, y)
    assert (a, b) == pytest.approx((model.coef_[0, 0], model.intercept_[0]), abs=1e-3)


def test_recalibration_fits_the_answers_and_gives_judged_pairs_their_answer():
    rng = np.random.default_rng(3)
    truth = rng.random(3000) < 0.3
    stated = np.clip(
        np.where(truth, 0.6, 0.4) + rng.normal(0, 0.1, 3000), 0.01, 0.99
    )  # a flat scorer, mean off the truth
    answers = np.full(3000, np.nan)
    judged = rng.choice(3000, 400, replace=False)
    answers[judged] = truth[judged]
    refit = recalibrated(stated, answers)
    assert np.array_equal(refit[judged], truth[judged].astype(float))
    rest = np.isnan(answers)
    gap = lambda p: abs(p[rest].mean() - truth[rest].mean())  # noqa: E731
    assert gap(refit) < 0.03 < gap(stated)  # the stated mean (~0.46) was off; the refit holds the truth
    assert recalibrated(stated, np.where(np.isnan(answers), np.nan, 0.0)) is None  # one kind of answer


@pytest.mark.parametrize("population, draws", [(10, 4), (45, 20), (80, 40), (200, 7)])
def test_the_hypergeometric_tail_is_scipys_and_the_bounds_are_its_extreme_counts(population, draws):
    from scipy.stats import hypergeom

    for successes in range(0, population + 1, max(population // 9, 1)):
        for x in range(draws + 1):
            assert hypergeometric_cdf(x, population, successes, draws) == pytest.approx(
                hypergeom.cdf(x, population, successes, draws), abs=1e-12
            )
    for correct in range(draws + 1):
        feasible = range(correct, population - (draws - correct) + 1)
        upper = max(c for c in feasible if hypergeom.cdf(correct, population, c, draws) > 0.1)
        lower = min(c for c in feasible if hypergeom.sf(correct - 1, population, c, draws) > 0.025)
        assert correct_upper(population, draws, correct, 0.1) == upper
        assert correct_lower(population, draws, correct, 0.025) == lower


def test_the_proven_cut_is_the_last_cut_of_the_fixed_sequence_that_passes():
    rng = np.random.default_rng(3)
    suspicion = rng.permutation(300).astype(float)
    in_cut = suspicion >= 220  # the 80 most suspect pairs
    answers = np.full(300, np.nan)
    ranked = np.argsort(-suspicion)
    answers[ranked[:80:2]] = 1.0  # every other pair of the cut judged mismatched
    answers[ranked[79]] = 0.0  # the least suspect pair of the cut judged correct
    answers[ranked[150]] = 1.0  # a judged mismatched pair outside the cut
    found = proven_cut(suspicion, answers, in_cut, 0.1, delta=0.1)
    for test in found.tests:  # each test's bound from its own counts
        judged = ~np.isnan(answers[ranked[: test.size]])
        assert test.answered == judged.sum()
        assert test.correct == (answers[ranked[: test.size]] == 0).sum()
        assert test.upper == correct_upper(test.size, test.answered, test.correct, 0.1)
        assert test.passed == (test.upper <= 0.1 * test.size)
    assert [t.size for t in found.tests] == [40, 50, 60, 70, 80][: len(found.tests)]
    passed = [t for t in found.tests if t.passed]
    assert found.size == passed[-1].size and all(t.passed for t in found.tests[:-1])
    expected = np.zeros(300, dtype=bool)
    expected[ranked[: found.size]] = True
    expected[answers == 0] = False  # a pair judged correct is kept
    expected[answers == 1] = True  # a pair judged mismatched is dropped
    assert np.array_equal(found.dropped, expected)
    assert found.unjudged == int((expected & np.isnan(answers)).sum())


def test_the_proven_cut_holds_its_level_over_random_samples():
    """A cut stratum of 100 pairs, its top 60 holding 3 correct pairs and its rest 20: over random
    samples of 40 of its pairs, the drop's false-discovery proportion exceeds 0.1 in at most
    δ = 0.1 of the runs (plus Monte Carlo slack); its 95% interval (``fdr_interval``) holds the
    realized proportion in at least 95% of the proven runs, and its high end is at least the
    proven bound, itself at most the level."""
    rng = np.random.default_rng(0)
    suspicion = np.arange(100, 0, -1).astype(float)
    truth = np.ones(100)
    truth[rng.choice(60, 3, replace=False)] = 0
    truth[60 + rng.choice(40, 20, replace=False)] = 0
    over, runs, proven, held = 0, 2000, 0, 0
    for _ in range(runs):
        answers = np.full(100, np.nan)
        judged = rng.choice(100, 40, replace=False)
        answers[judged] = truth[judged]
        found = proven_cut(suspicion, answers, np.ones(100, dtype=bool), 0.1, delta=0.1)
        fdp = 1 - truth[found.dropped].mean() if found.dropped.any() else 0.0
        over += fdp > 0.1
        proven += found.size > 0
        if found.size:
            low, high = found.fdr_interval
            held += low - 1e-12 <= fdp <= high + 1e-12
            assert found.fdr_proven <= min(0.1, high) + 1e-12
    assert over / runs <= 0.1 + 0.02
    assert held / proven >= 0.95 - 0.02
    assert proven / runs > 0.15  # and it is not vacuous: about one run in five proves a cut


def test_with_no_suspect_the_line_says_there_is_no_cut_to_prove():
    """An audit that suspects no pair (a near-miss collection): the drop is the pairs judged
    mismatched, and the line says why no cut is proven instead of how many answers would prove one."""
    from mispair.estimate.audit_estimate import LabelledDrop
    from mispair.estimate.share import ShareEstimate

    answers = np.array([1.0, 0.0, np.nan, 1.0, np.nan])
    cut = proven_cut(np.arange(5.0), answers, np.zeros(5, dtype=bool), 0.1)
    assert cut.cut_pairs == 0 and cut.size == 0 and cut.dropped.tolist() == [True, False, False, True, False]
    drop = LabelledDrop(0.1, cut, 3, ShareEstimate(0.2, 0.0, 0.5, 0.0, 0.4, 2), None, False)
    line = drop.line()
    assert "the audit suspects no pair, so there is no cut to prove" in line
    assert "the 2 pairs judged mismatched are dropped" in line and "more answers" not in line

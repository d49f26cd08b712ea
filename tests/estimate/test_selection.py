"""The labelled drop (:mod:`mispair.estimate.selection`): conformal p-values equal a loop over
the judged pairs, Benjamini–Hochberg equals statsmodels', and over many random samples of a
population with a known truth the realized false-discovery rate stays within the level on
average (Jin & Candès 2023, Thm 2.3), even with a scorer that ranks badly."""

import numpy as np
import pytest

from mispair.estimate.selection import benjamini_hochberg, conformal_selection, platt, recalibrated

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

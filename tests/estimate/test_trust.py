"""The trust numbers on a person's answers (:mod:`mispair.estimate.trust`): the AUC equals
scikit-learn's and DeLong's variance equals its structural-component formula written as loops
(floored by Hanley & McNeil's);
Wilson's interval equals statsmodels'; the blind-spot warning appears only when the answers say
many pairs are mismatched that the scores do not find."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from mispair.estimate.share import Z_975
from mispair.estimate.trust import Interval, blind_spot, ranking_auc, wilson

proportion = pytest.importorskip("statsmodels.stats.proportion")


def test_the_auc_is_scikit_learns_with_delongs_interval():
    rng = np.random.default_rng(0)
    y = rng.random(80) < 0.3
    p = np.round(rng.normal(y * 1.0, 1.0), 1)  # ties
    found = ranking_auc(p, y)
    assert found.value == pytest.approx(roc_auc_score(y, p))
    pos, neg = p[y], p[~y]
    psi = lambda a, b: 1.0 if a > b else 0.5 if a == b else 0.0  # noqa: E731
    v10 = [np.mean([psi(a, b) for b in neg]) for a in pos]
    v01 = [np.mean([psi(a, b) for a in pos]) for b in neg]
    delong = np.var(v10, ddof=1) / len(pos) + np.var(v01, ddof=1) / len(neg)
    n1, n0 = len(pos), len(neg)
    a = found.value * n1 * n0 / (n1 * n0 + 1)  # Hanley-McNeil's variance, one pseudo-pair shrunk, the floor
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    floor = (a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (n1 * n0)
    assert found.high - found.value == pytest.approx(
        min(Z_975 * np.sqrt(max(delong, floor)), 1 - found.value)
    )
    perfect = ranking_auc(np.arange(12.0), np.arange(12) >= 6)  # separated perfectly: still an interval
    assert perfect.value == 1.0 and perfect.low < 0.95
    assert ranking_auc(p[:3], np.array([True, False, False])) is None


@pytest.mark.parametrize("k, n", [(0, 10), (3, 10), (10, 10), (17, 140)])
def test_wilson_is_statsmodels(k, n):
    low, high = proportion.proportion_confint(k, n, alpha=0.05, method="wilson")
    found = wilson(k, n)
    assert (found.low, found.high) == pytest.approx((low, high), abs=1e-9)
    assert wilson(0, 0) is None


def test_the_blind_spot_is_said_only_where_the_scores_miss_what_the_answers_find():
    few, weak, strong = Interval(0.1, 0.02, 0.3), Interval(0.55, 0.45, 0.65), Interval(0.95, 0.9, 0.99)
    assert "few of them" in blind_spot(0.15, 0.28, few, weak)  # 28% mismatched, few found, a weak ranking
    assert "few of them" in blind_spot(0.15, 0.28, few, None)  # too few answers to measure the ranking
    assert "cut is cautious" in blind_spot(0.15, 0.28, few, strong)  # proven high, cut too strict
    unclear = Interval(0.75, 0.63, 0.87)  # the Oxygen icons' near misses at 100 answers
    assert "cannot yet tell" in blind_spot(0.15, 0.28, few, unclear)  # "cautious" only when proven
    assert blind_spot(0.0, 0.05, few, weak) is None  # the share could be nothing
    assert blind_spot(0.15, 0.28, Interval(0.8, 0.6, 0.9), weak) is None  # the audit found them
    assert blind_spot(0.15, 0.28, None, weak) is None


def test_the_weighted_auc_is_sklearns_with_sample_weights_and_equal_weights_change_nothing():
    rng = np.random.default_rng(5)
    y = rng.random(120) < 0.3
    f = np.clip(y * 0.3 + rng.random(120) * 0.7, 0, 1).round(2)  # ties included
    w = rng.choice([1.0, 4.0, 9.5], size=120)
    found = ranking_auc(f, y, w)
    assert found.value == pytest.approx(roc_auc_score(y, f, sample_weight=w), abs=1e-12)
    plain, equal = ranking_auc(f, y), ranking_auc(f, y, np.full(120, 3.0))
    assert equal.to_list() == pytest.approx(plain.to_list(), abs=1e-12)
    assert equal.value == pytest.approx(plain.value, abs=1e-12)


def test_over_stratified_samples_the_weighted_auc_and_recall_find_the_collections():
    """A collection whose suspects (the top tenth) are sampled at ten times the rate of the rest:
    the unweighted AUC and recall on the sample are far off; the weighted ones are the
    collection's within Monte Carlo error."""
    from mispair.estimate.trust import weighted_recall

    rng = np.random.default_rng(0)
    y = rng.random(4000) < 0.25
    f = 1 / (1 + np.exp(-rng.normal(1.2 * (2 * y - 1), 1.0)))
    cut = f >= np.quantile(f, 0.9)
    true_auc, true_recall = roc_auc_score(y, f), cut[y].mean()
    aucs, plain, recalls, plain_recalls = [], [], [], []
    for _ in range(300):
        top = rng.choice(np.flatnonzero(cut), 100, replace=False)
        rest = rng.choice(np.flatnonzero(~cut), 100, replace=False)
        at = np.concatenate([top, rest])
        w = np.where(cut[at], cut.sum() / 100, (~cut).sum() / 100)
        aucs.append(ranking_auc(f[at], y[at], w).value)
        plain.append(ranking_auc(f[at], y[at]).value)
        mismatched = at[y[at]]
        recalls.append(weighted_recall(cut[mismatched], w[y[at]]).value)
        plain_recalls.append(cut[mismatched].mean())
    assert np.mean(aucs) == pytest.approx(true_auc, abs=0.01)
    assert np.mean(recalls) == pytest.approx(true_recall, abs=0.015)
    assert abs(np.mean(plain_recalls) - true_recall) > 0.2  # what the sample alone says

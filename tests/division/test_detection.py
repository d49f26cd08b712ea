"""Detection scores against scikit-learn and a pairwise brute-force AUC."""

import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_score, recall_score

from mispair.division import Division, detection_metrics


def _scores(n=300, seed=1):
    rng = np.random.default_rng(seed)
    is_noisy = rng.random(n) < 0.4
    clean_prob = np.clip(rng.normal(np.where(is_noisy, 0.3, 0.7), 0.2), 0, 1).round(2)  # ties
    return clean_prob, is_noisy


def _pairwise_auc(clean_prob, is_noisy):
    hits = 0.0
    for c in clean_prob[~is_noisy]:
        for n in clean_prob[is_noisy]:
            hits += 1.0 if c > n else 0.5 if c == n else 0.0
    return hits / ((~is_noisy).sum() * is_noisy.sum())


@pytest.mark.parametrize("threshold", [0.5, 0.3, 0.7])
def test_matches_sklearn_and_brute_force_auc(threshold):
    clean_prob, is_noisy = _scores()
    m = detection_metrics(clean_prob, is_noisy, threshold=threshold)
    predicted, is_clean = clean_prob > threshold, ~is_noisy
    assert m["auc"] == pytest.approx(_pairwise_auc(clean_prob, is_noisy), abs=1e-12)
    assert m["precision"] == pytest.approx(precision_score(is_clean, predicted))
    assert m["recall"] == pytest.approx(recall_score(is_clean, predicted))
    assert m["f1"] == pytest.approx(f1_score(is_clean, predicted))
    assert m["clean_fraction"] == pytest.approx(predicted.mean())
    assert set(m) == {"auc", "precision", "recall", "f1", "clean_fraction"}


def test_split_agrees_with_division():
    clean_prob, is_noisy = _scores()
    predicted = Division(clean_prob).split(0.5)
    assert detection_metrics(clean_prob, is_noisy)["clean_fraction"] == predicted.mean()


def test_one_class_gives_nan_auc_and_defined_rest():
    clean_prob, _ = _scores()
    all_clean = detection_metrics(clean_prob, np.zeros(300, bool))
    assert np.isnan(all_clean["auc"]) and all_clean["precision"] == 1.0
    assert all_clean["recall"] == pytest.approx((clean_prob > 0.5).mean())
    all_noisy = detection_metrics(clean_prob, np.ones(300, bool))
    assert np.isnan(all_noisy["auc"])
    assert all_noisy["precision"] == all_noisy["recall"] == all_noisy["f1"] == 0.0


def test_nothing_predicted_clean_scores_zero():
    _, is_noisy = _scores()
    m = detection_metrics(np.zeros(300), is_noisy)
    assert m["auc"] == 0.5 and m["precision"] == m["recall"] == m["f1"] == m["clean_fraction"] == 0


def test_bad_input_raises():
    with pytest.raises(ValueError, match="same length"):
        detection_metrics(np.zeros(3), np.zeros(4, bool))
    with pytest.raises(ValueError, match="same length"):
        detection_metrics(np.zeros(0), np.zeros(0, bool))
    with pytest.raises(ValueError, match="NaN"):
        detection_metrics(np.array([0.1, np.nan]), np.array([True, False]))

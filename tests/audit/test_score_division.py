"""The audit's mismatch probability never rises with the held-out score (a pair is at least as
likely clean as any pair it outscores), checked against a brute-force loop."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from mispair.audit.ranking import monotone_clean_prob, score_division


def brute_force(score, clean_prob):
    return np.array(
        [max(clean_prob[j] for j in range(len(score)) if score[j] <= score[i]) for i in range(len(score))]
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-20, 20), st.floats(0, 1)), min_size=1, max_size=40))
def test_the_monotone_majorant_is_the_brute_force_one(pairs):
    score = np.array([p[0] for p in pairs], dtype=np.float64)  # integers: ties are frequent
    clean = np.array([p[1] for p in pairs])
    np.testing.assert_array_equal(monotone_clean_prob(score, clean), brute_force(score, clean))


def test_an_already_monotone_posterior_is_unchanged():
    score = np.random.default_rng(0).normal(size=50)
    clean = 1 / (1 + np.exp(-3 * score))
    np.testing.assert_array_equal(monotone_clean_prob(score, clean), clean)


def test_a_skewed_score_ranks_alike_by_score_and_by_mismatch_probability():
    rng = np.random.default_rng(1)
    clean = -rng.exponential(1.0, size=300)  # a long left tail, as held-out contrast scores have
    mismatched = -4 - rng.exponential(4.0, size=100)
    score = np.concatenate([clean, mismatched])
    truth = np.r_[np.zeros(300), np.ones(100)]
    mismatch = 1 - score_division(score).clean_prob
    ordered = mismatch[np.argsort(score)]
    assert (np.diff(ordered) <= 1e-12).all()
    # the clamped plateaus tie some pairs, so the ranking can only lose a little to the score's own
    assert roc_auc_score(truth, mismatch) >= roc_auc_score(truth, -score) - 0.01

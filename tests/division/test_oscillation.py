"""PC²'s prediction oscillation (Eq. 7) against an explicit loop."""

import math

import numpy as np
import pytest

from mispair.division import oscillation_scores


def _kl_loop(prev, cur, eps=1e-12):
    """``Σ_k p_k log(p_k / max(q_k, eps))`` with ``0 log 0 = 0``, sample by sample."""
    out = []
    for p_row, q_row in zip(cur, prev):
        out.append(sum(p * math.log(p / max(q, eps)) for p, q in zip(p_row, q_row) if p > 0))
    return out


def test_matches_loop_with_zeros():
    rng = np.random.default_rng(2)
    prev, cur = rng.dirichlet(np.ones(6), 30), rng.dirichlet(np.ones(6), 30)
    cur[0] = [1, 0, 0, 0, 0, 0]  # zeros in the current prediction: 0 log 0 = 0
    prev[1], cur[1] = [0, 0, 0.5, 0.5, 0, 0], [0.5, 0, 0.5, 0, 0, 0]  # a ruled-out class returns
    scores = oscillation_scores(prev, cur)
    np.testing.assert_allclose(scores, _kl_loop(prev, cur), rtol=1e-12)
    assert np.isfinite(scores).all() and scores[1] > 10 and (scores >= -1e-12).all()


def test_direction_is_current_against_previous():
    prev, cur = np.array([[0.5, 0.5]]), np.array([[0.9, 0.1]])
    expected = 0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)
    assert oscillation_scores(prev, cur)[0] == pytest.approx(expected)
    assert oscillation_scores(cur, prev)[0] != pytest.approx(expected)


def test_steady_predictions_do_not_oscillate():
    probs = np.random.default_rng(3).dirichlet(np.ones(4), 10)
    np.testing.assert_allclose(oscillation_scores(probs, probs), 0, atol=1e-12)


def test_shapes_must_match():
    with pytest.raises(ValueError, match="same shape"):
        oscillation_scores(np.ones((3, 2)) / 2, np.ones((3, 4)) / 4)
    with pytest.raises(ValueError, match="same shape"):
        oscillation_scores(np.ones(3), np.ones(3))

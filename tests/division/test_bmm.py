"""Beta mixture (L2RM §4.1): recovery of known betas, posteriors by brute force, the EM loop."""

import numpy as np
import pytest
from scipy import stats

from mispair.division import DegenerateDivisionWarning, fit_bmm

from .conftest import two_modes


def _known_mixture(n=10_000, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.beta(2, 8, n), rng.beta(8, 2, n)])


def _posterior_by_hand(x, alphas, betas, weights):
    """Clean posterior ``π_0 f_0 / (π_0 f_0 + π_1 f_1)`` with scipy's beta pdf."""
    joint = [w * stats.beta.pdf(x, a, b) for a, b, w in zip(alphas, betas, weights)]
    return joint[0] / (joint[0] + joint[1])


def test_recovers_known_beta_parameters():
    division = fit_bmm(_known_mixture(), max_iter=200)
    p = division.params
    np.testing.assert_allclose(p["alphas"], [2, 8], rtol=0.06)
    np.testing.assert_allclose(p["betas"], [8, 2], rtol=0.06)
    np.testing.assert_allclose(p["weights"], [0.5, 0.5], atol=0.02)
    np.testing.assert_allclose(p["means"], [0.2, 0.8], atol=0.01)
    assert division.split()[:10_000].mean() > 0.97 and division.split()[10_000:].mean() < 0.03


@pytest.mark.parametrize("max_iter", [10, 200])
def test_posteriors_match_brute_force_from_fitted_params(max_iter):
    losses = _known_mixture(1000, seed=1)
    division = fit_bmm(losses, max_iter=max_iter)
    p = division.params
    x = np.clip(losses, 1e-3, 1 - 1e-3)
    expected = _posterior_by_hand(x, p["alphas"], p["betas"], p["weights"])
    np.testing.assert_allclose(division.clean_prob, expected, rtol=1e-9, atol=1e-12)


def test_default_is_ten_em_steps_from_the_reference_start():
    """BiCro's/L2RM's scheme written out: start Beta(1, 2), Beta(2, 1), equal weights; 10 times
    an E-step then a weighted method-of-moments M-step; then the posterior."""
    x = np.clip(two_modes(300), 1e-3, 1 - 1e-3)
    alphas, betas, weights = [1.0, 2.0], [2.0, 1.0], [0.5, 0.5]
    for _ in range(10):
        r0 = _posterior_by_hand(x, alphas, betas, weights)
        alphas, betas, weights = [], [], []
        for r in (r0, 1 - r0):
            m = np.average(x, weights=r)
            v = np.average((x - m) ** 2, weights=r)
            alphas.append(m * (m * (1 - m) / v - 1))
            betas.append((1 - m) * (m * (1 - m) / v - 1))
            weights.append(r.mean())
    division = fit_bmm(two_modes(300))
    np.testing.assert_allclose(division.params["alphas"], alphas, rtol=1e-9)
    np.testing.assert_allclose(division.params["betas"], betas, rtol=1e-9)
    np.testing.assert_allclose(
        division.clean_prob, _posterior_by_hand(x, alphas, betas, weights), rtol=1e-9, atol=1e-12
    )


def test_clean_prob_is_the_lower_mean_component():
    losses = _known_mixture(2000)
    division = fit_bmm(losses)
    assert division.params["means"][0] < division.params["means"][1]
    # the start is symmetric under x → 1 − x, so reflecting swaps the components exactly
    np.testing.assert_allclose(fit_bmm(1 - losses).clean_prob, 1 - division.clean_prob, atol=1e-9)


def test_endpoints_are_clipped_and_outside_values_warn():
    losses = _known_mixture(500)
    losses = (losses - losses.min()) / (losses.max() - losses.min())  # exactly 0 and 1 in it
    division = fit_bmm(losses)
    assert np.isfinite(division.clean_prob).all()
    assert division.clean_prob[losses.argmin()] > 0.99 and division.clean_prob[losses.argmax()] < 0.01
    with pytest.warns(DegenerateDivisionWarning, match=r"outside \[0, 1\]"):
        outside = fit_bmm(losses * 2)
    np.testing.assert_allclose(outside.clean_prob, fit_bmm(np.clip(losses * 2, 0, 1)).clean_prob)


def test_eps_sets_the_clipping():
    losses = two_modes(200)
    a, b = fit_bmm(losses, eps=1e-2), fit_bmm(np.clip(losses, 1e-2, 1 - 1e-2), eps=1e-4)
    np.testing.assert_allclose(a.clean_prob, b.clean_prob)

"""GMM (NCR) and VBGMM (ASL) divisions against scikit-learn called directly."""

import warnings

import numpy as np
import pytest
from sklearn.mixture import BayesianGaussianMixture, GaussianMixture

from mispair.division import fit_gmm, fit_vbgmm

from .conftest import two_modes

REFERENCES = [
    (
        fit_gmm,
        lambda seed: GaussianMixture(
            n_components=2, max_iter=10, tol=1e-2, reg_covar=5e-4, random_state=seed
        ),
    ),
    (
        fit_vbgmm,
        lambda seed: BayesianGaussianMixture(
            n_components=2, max_iter=10, tol=1e-2, reg_covar=5e-4, random_state=seed
        ),
    ),
]


@pytest.mark.parametrize("fit, make_reference", REFERENCES)
@pytest.mark.parametrize("seed", [0, 3])
def test_posteriors_and_params_match_sklearn(fit, make_reference, seed):
    losses = two_modes(seed=seed)
    reference = make_reference(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference.fit(losses[:, None])
    clean = reference.means_.ravel().argmin()
    division = fit(losses, seed=seed)
    assert division.clean_prob.dtype == np.float64 and division.clean_prob.shape == (2000,)
    expected = reference.predict_proba(losses[:, None])[:, clean]
    np.testing.assert_allclose(division.clean_prob, expected, atol=1e-12)
    order = [clean, 1 - clean]
    np.testing.assert_allclose(division.params["means"], reference.means_.ravel()[order])
    np.testing.assert_allclose(division.params["variances"], reference.covariances_.ravel()[order])
    np.testing.assert_allclose(division.params["weights"], reference.weights_[order])


@pytest.mark.parametrize("fit", [fit_gmm, fit_vbgmm])
def test_clean_prob_is_the_lower_mean_component(fit):
    losses = two_modes()
    division = fit(losses)
    assert division.params["means"][0] < division.params["means"][1]
    assert division.split()[:1000].mean() > 0.97 and division.split()[1000:].mean() < 0.03
    # reflecting the losses swaps which component has the lower mean
    np.testing.assert_allclose(fit(1 - losses).clean_prob, 1 - division.clean_prob, atol=1e-6)


@pytest.mark.parametrize("fit", [fit_gmm, fit_vbgmm])
def test_settings_reach_sklearn(fit):
    losses = two_modes(200)
    assert not np.allclose(fit(losses, max_iter=1).clean_prob, fit(losses, max_iter=50).clean_prob)
    assert not np.allclose(fit(losses, reg_covar=0.5).clean_prob, fit(losses).clean_prob)

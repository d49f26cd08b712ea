"""Degenerate losses warn with DegenerateDivisionWarning and give the documented result."""

import warnings

import numpy as np
import pytest

from mispair.division import (
    DegenerateDivisionWarning,
    Division,
    divide,
    fit_bmm,
    fit_gmm,
    fit_vbgmm,
    min_max_normalize,
)

from .conftest import two_modes

FITS = [fit_gmm, fit_vbgmm, fit_bmm]


@pytest.mark.parametrize("fit", FITS)
def test_ordinary_losses_do_not_warn(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit(two_modes(300))


@pytest.mark.parametrize("fit", FITS)
@pytest.mark.parametrize(
    "losses", [np.full(10, 0.3), np.array([0.4]), np.array([])], ids=["all-equal", "one", "empty"]
)
def test_nothing_to_divide_takes_everything_as_clean(fit, losses):
    with pytest.warns(DegenerateDivisionWarning, match="fewer than two distinct"):
        division = fit(losses)
    assert division.clean_prob.tolist() == [1.0] * len(losses) and division.params == {}
    assert division.split().all()


@pytest.mark.parametrize("fit", FITS)
def test_non_finite_losses_are_noisy_and_the_rest_is_fitted_alone(fit):
    losses = two_modes(300)
    spoiled = losses.copy()
    spoiled[[3, 7, 400]] = [np.nan, np.inf, -np.inf]
    with pytest.warns(DegenerateDivisionWarning, match="3 of 600 losses are NaN or infinite"):
        division = fit(spoiled)
    assert division.clean_prob[[3, 7, 400]].tolist() == [0.0, 0.0, 0.0]
    keep = np.isfinite(spoiled)
    np.testing.assert_allclose(division.clean_prob[keep], fit(losses[keep]).clean_prob)


@pytest.mark.parametrize("fit", FITS)
def test_nan_with_one_finite_value_left(fit):
    with pytest.warns(DegenerateDivisionWarning) as record:
        division = fit(np.array([np.nan, 0.5, 0.5]))
    assert division.clean_prob.tolist() == [0.0, 1.0, 1.0] and len(record) == 2


def test_collapsed_component_takes_everything_as_clean():
    def collapsed(x):
        posterior = np.zeros((len(x), 2))
        posterior[:, 1] = 1.0  # the lower-mean component holds no sample
        return posterior, {"means": [0.1, 0.5], "weights": [1e-9, 1.0]}

    with pytest.warns(DegenerateDivisionWarning, match="collapsed"):
        division = divide(np.array([0.1, 0.5, 0.6]), collapsed)
    assert division.clean_prob.tolist() == [1.0, 1.0, 1.0]
    assert division.params["weights"] == [1e-9, 1.0]


def test_vbgmm_prior_switching_a_component_off_is_a_collapse():
    with pytest.warns(DegenerateDivisionWarning, match="collapsed"):
        division = fit_vbgmm(np.array([0.0, 1.0]))
    assert division.clean_prob.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("fit", FITS)
def test_a_single_outlier_is_noisy_not_a_collapse(fit):
    losses = np.r_[np.zeros(999), 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        division = fit(losses)
    assert division.split().tolist() == [True] * 999 + [False]


@pytest.mark.parametrize("fit", FITS)
def test_losses_must_be_one_dimensional(fit):
    with pytest.raises(ValueError, match="1-D"):
        fit(two_modes(10)[:, None])


def test_min_max_normalize():
    np.testing.assert_allclose(min_max_normalize(np.array([2.0, 4.0, 3.0])), [0.0, 1.0, 0.5])
    np.testing.assert_array_equal(min_max_normalize(np.full(4, 7.0)), np.zeros(4))
    out = min_max_normalize(np.array([np.nan, 1.0, np.inf, 3.0]))
    assert np.isnan(out[0]) and out[2] == np.inf and out[[1, 3]].tolist() == [0.0, 1.0]
    assert np.isnan(min_max_normalize(np.array([np.nan]))).all()
    assert min_max_normalize(np.array([])).shape == (0,)


def test_split_is_strictly_above_the_threshold():
    division = Division(np.array([0.2, 0.5, 0.7]))
    assert division.split().tolist() == [False, False, True]
    assert division.split(0.1).tolist() == [True, True, True]

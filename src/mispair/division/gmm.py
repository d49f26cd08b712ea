"""Gaussian mixtures over per-sample losses: NCR's GMM and ASL's variational Bayesian GMM."""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import BayesianGaussianMixture, GaussianMixture

from mispair.division.mixtures import Division, divide


def fit_gmm(
    losses: np.ndarray,
    *,
    max_iter: int = 10,
    tol: float = 1e-2,
    reg_covar: float = 5e-4,
    seed: int = 0,
) -> Division:
    """Two-component Gaussian mixture on per-sample losses, NCR's division.

    ``p(ℓ_i) = Σ_k π_k N(ℓ_i | μ_k, σ_k²)`` fitted by EM (scikit-learn ``GaussianMixture``, NCR's
    settings); the clean probability is ``p(k_clean | ℓ_i)`` of the lower-mean component.

    Args:
        losses: ``[N]`` per-sample losses, usually :func:`min_max_normalize`-d first, as in NCR.
        max_iter, tol, reg_covar: EM settings (NCR: 10, 1e-2, 5e-4).
        seed: ``random_state`` of the k-means initialisation.

    Returns:
        A :class:`Division` with ``params`` ``means``, ``variances``, ``weights``. Degenerate
        input warns and follows the convention of :mod:`mispair.division.mixtures`.

    Example:
        >>> import numpy as np
        >>> losses = np.r_[np.linspace(0.0, 0.2, 50), np.linspace(0.8, 1.0, 50)]
        >>> fit_gmm(losses).split().tolist() == [True] * 50 + [False] * 50
        True
    """
    model = GaussianMixture(2, max_iter=max_iter, tol=tol, reg_covar=reg_covar, random_state=seed)
    return divide(losses, partial(_fit_gaussian, model))


def fit_vbgmm(
    losses: np.ndarray,
    *,
    max_iter: int = 10,
    reg_covar: float = 5e-4,
    tol: float = 1e-2,
    seed: int = 0,
) -> Division:
    """Two-component variational Bayesian Gaussian mixture, ASL's "Soft Label Estimation with
    VBGMM".

    The same mixture as :func:`fit_gmm` with a Dirichlet-process prior on the weights and
    conjugate priors on means and precisions, fitted by variational EM (scikit-learn
    ``BayesianGaussianMixture``, its default priors). ASL states ``max_iter`` 10 and
    ``reg_covar`` 5e-4; ``tol`` is NCR's 1e-2, as ASL builds on NCR. The clean probability is
    ``p(k_clean | ℓ_i) = π_k φ(ℓ_i | θ_k) / p(ℓ_i)`` of the lower-mean component.

    Args:
        losses: ``[N]`` per-sample losses, usually :func:`min_max_normalize`-d first.
        max_iter, reg_covar, tol: variational EM settings.
        seed: ``random_state`` of the k-means initialisation.

    Returns:
        A :class:`Division` with ``params`` ``means``, ``variances``, ``weights`` (posterior
        estimates). A component the prior switches off is a collapse: see
        :mod:`mispair.division.mixtures`. The Dirichlet-process prior is not symmetric in the
        components, so which cluster k-means labels first (it depends on the sample order)
        moves the posteriors slightly (up to ~1e-2).
    """
    model = BayesianGaussianMixture(
        n_components=2, max_iter=max_iter, tol=tol, reg_covar=reg_covar, random_state=seed
    )
    return divide(losses, partial(_fit_gaussian, model))


def _fit_gaussian(
    model: GaussianMixture | BayesianGaussianMixture, losses: np.ndarray
) -> tuple[np.ndarray, dict[str, list[float]]]:
    """Fit ``model`` to ``losses`` ``[n]``; posteriors ``[n, 2]`` and params, lower mean first."""
    x = losses.reshape(-1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 10 iterations is the setting
        model.fit(x)
    order = np.argsort(model.means_.ravel())
    params = {
        "means": model.means_.ravel()[order].tolist(),
        "variances": model.covariances_.ravel()[order].tolist(),
        "weights": model.weights_[order].tolist(),
    }
    return model.predict_proba(x)[:, order], params

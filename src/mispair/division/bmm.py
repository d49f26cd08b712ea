"""Beta mixture over per-sample losses by EM with weighted method-of-moments M-steps (L2RM §4.1).

The losses, normalised to [0, 1] and clipped to ``[eps, 1 − eps]``, are modelled as
``p(ℓ) = Σ_k π_k Beta(ℓ | α_k, β_k)``. The E-step computes responsibilities
``r_ik = π_k Beta(ℓ_i | α_k, β_k) / p(ℓ_i)``; the M-step sets ``π_k = mean_i r_ik`` and matches
each component's responsibility-weighted mean ``m`` and variance ``v``:
``α = m·c``, ``β = (1 − m)·c`` with ``c = m(1 − m)/v − 1`` — the scheme of Arazo et al. 2019 that
BiCro and L2RM's references use, started like theirs from Beta(1, 2) and Beta(2, 1), equal weights.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import special

from mispair.division.mixtures import DegenerateDivisionWarning, Division, divide

_INIT = (np.array([1.0, 2.0]), np.array([2.0, 1.0]), np.array([0.5, 0.5]))  # alphas, betas, π
_MIN_SHARE = 1e-6  # variance floor as a share of m(1 − m): a component on one value stays finite


def fit_bmm(losses: np.ndarray, *, max_iter: int = 10, eps: float = 1e-3) -> Division:
    """Two-component beta mixture on per-sample losses, L2RM's division (§4.1, after Eq. 4).

    Args:
        losses: ``[N]`` per-sample losses in [0, 1] (:func:`min_max_normalize` them first; values
            outside warn and are clipped like the rest).
        max_iter: EM iterations (10 in L2RM's and BiCro's references).
        eps: losses are clipped to ``[eps, 1 − eps]``, where the beta density is finite (L2RM:
            1e-3).

    Returns:
        A :class:`Division` with ``params`` ``alphas``, ``betas``, ``weights``, ``means``; its
        ``clean_prob`` is the posterior of the lower-mean component, ``1 − w_i`` of L2RM.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> losses = np.r_[rng.beta(2, 8, 500), rng.beta(8, 2, 500)]
        >>> bool(fit_bmm(losses).split()[:500].mean() > 0.9)
        True
    """
    losses = np.asarray(losses, dtype=np.float64)
    if np.any(np.isfinite(losses) & ((losses < 0) | (losses > 1))):
        warnings.warn(
            "beta mixture: losses outside [0, 1] are clipped; normalise them first",
            DegenerateDivisionWarning,
            stacklevel=2,
        )
    return divide(losses, lambda finite: _fit_beta(np.clip(finite, eps, 1 - eps), max_iter))


def _fit_beta(x: np.ndarray, max_iter: int) -> tuple[np.ndarray, dict[str, list[float]]]:
    """EM on ``x`` ``[n]`` in (0, 1); posteriors ``[n, 2]`` and params, lower mean first.

    Stops early, keeping the last parameters, when a component loses (almost) all its mass.
    """
    alphas, betas, weights = _INIT
    for _ in range(max_iter):
        resp = _beta_posterior(x, alphas, betas, weights)
        if resp.sum(axis=0).min() < 1e-6:
            break
        alphas, betas, weights = _weighted_moments(x, resp)
    means = alphas / (alphas + betas)
    order = np.argsort(means)
    params = {
        "alphas": alphas[order].tolist(),
        "betas": betas[order].tolist(),
        "weights": weights[order].tolist(),
        "means": means[order].tolist(),
    }
    return _beta_posterior(x, alphas[order], betas[order], weights[order]), params


def _beta_posterior(x: np.ndarray, alphas: np.ndarray, betas: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``[n, K]`` responsibilities ``π_k Beta(x_i | α_k, β_k) / Σ_j π_j Beta(x_i | α_j, β_j)``,
    computed in the log domain, for ``x`` ``[n]`` in (0, 1) and ``K`` components."""
    log_density = (
        np.outer(np.log(x), alphas - 1) + np.outer(np.log1p(-x), betas - 1) - special.betaln(alphas, betas)
    )
    return special.softmax(np.log(weights) + log_density, axis=1)


def _weighted_moments(x: np.ndarray, resp: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """M-step: ``(α, β, π)`` ``[K]`` each from ``x`` ``[n]`` and responsibilities ``[n, K]``."""
    mass = resp.sum(axis=0)
    mean = x @ resp / mass
    spread = mean * (1 - mean)  # the largest variance a distribution on [0, 1] can have
    var = np.maximum(((x[:, None] - mean) ** 2 * resp).sum(axis=0) / mass, _MIN_SHARE * spread)
    common = spread / var - 1
    return mean * common, (1 - mean) * common, mass / mass.sum()

"""The clean/noisy division of per-sample losses, and the cases where there is nothing to divide.

Every mixture (:func:`~mispair.division.gmm.fit_gmm`, :func:`~mispair.division.gmm.fit_vbgmm`,
:func:`~mispair.division.bmm.fit_bmm`) goes through :func:`divide`, which fixes one convention for
degenerate input, warns with :class:`DegenerateDivisionWarning`, and never raises:

* non-finite losses (NaN, ±inf) get ``clean_prob`` 0 — taken as noisy — and the rest is fitted;
* fewer than two finite samples, fewer than two distinct finite losses, or a fit that leaves a
  component with less than half a sample's worth of posterior mass (a collapsed component) give
  ``clean_prob`` 1 to every finite sample: one population, nothing can be told apart, and like
  NCR's first epochs every pair counts as clean. ``params`` is empty for the first two cases and
  holds the collapsed fit for the third.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

T = TypeVar("T")

#: A fit of finite losses ``[n]`` → (posteriors ``[n, 2]``, lower-mean component first; params).
MixtureFit = Callable[[np.ndarray], tuple[np.ndarray, dict[str, list[float]]]]


class DegenerateDivisionWarning(RuntimeWarning):
    """The losses could not be divided by a two-component mixture as they are."""


@dataclass(eq=False)
class Division:
    """A two-component mixture fitted to per-sample losses.

    Attributes:
        clean_prob: ``[N]`` float64 in [0, 1], posterior of the lower-mean (clean) component.
        params: the fitted mixture as plain numbers, lower-mean component first: ``means``,
            ``weights``, and ``variances`` (Gaussian) or ``alphas``/``betas`` (beta).
    """

    clean_prob: np.ndarray
    params: dict[str, list[float]] = field(default_factory=dict)

    def split(self, threshold: float = 0.5) -> np.ndarray:
        """``[N]`` bool, True where the pair is taken as clean: ``clean_prob > threshold``."""
        return self.clean_prob > threshold


def min_max_normalize(losses: np.ndarray) -> np.ndarray:
    """Scale losses ``[N]`` to [0, 1] by their finite minimum and maximum, as NCR does before the
    fit; non-finite entries stay non-finite, and constant input becomes all 0."""
    losses = np.asarray(losses, dtype=np.float64)
    finite = np.isfinite(losses)
    if not finite.any():
        return losses.copy()
    low, high = losses[finite].min(), losses[finite].max()
    span = high - low if high > low else 1.0
    return np.where(finite, (losses - low) / span, losses)


def divide(losses: np.ndarray, fit: MixtureFit) -> Division:
    """Run ``fit`` on the finite losses ``[N]`` under the degenerate-case convention above.

    Raises:
        ValueError: ``losses`` is not one-dimensional.
    """
    losses = np.asarray(losses, dtype=np.float64)
    if losses.ndim != 1:
        raise ValueError(f"per-sample losses must be 1-D, got shape {losses.shape}")
    finite = np.isfinite(losses)
    prob = np.zeros(len(losses))
    if not finite.all():
        _warn(f"{(~finite).sum()} of {len(losses)} losses are NaN or infinite: taken as noisy")
    if len(np.unique(losses[finite])) < 2:
        _warn("fewer than two distinct finite losses: every finite sample is taken as clean")
        prob[finite] = 1.0
        return Division(prob)
    posterior, params = fit(losses[finite])
    if posterior.sum(axis=0).min() < 0.5:
        _warn(
            f"a mixture component collapsed (weights {params['weights']}): every finite sample "
            "is taken as clean"
        )
        prob[finite] = 1.0
    else:
        prob[finite] = posterior[:, 0]
    return Division(prob, params)


def co_divide(divisions: Sequence[T]) -> list[T]:
    """NCR's co-divide: the two networks swap divisions, so the split each one trains on comes
    from the *other* network's losses (less confirmation of its own mistakes).

    ``co_divide([div_a, div_b])`` is ``[div_b, div_a]``: entry ``k`` is what model ``k`` trains
    on. Works for :class:`Division` objects or bare ``clean_prob`` arrays alike.

    Raises:
        ValueError: not exactly two divisions.
    """
    if len(divisions) != 2:
        raise ValueError(f"co-divide needs the divisions of two networks, got {len(divisions)}")
    return [divisions[1], divisions[0]]


def _warn(message: str) -> None:
    warnings.warn(message, DegenerateDivisionWarning, stacklevel=4)

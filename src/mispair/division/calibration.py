"""Held-out scores as numbers a person can act on, calibrated by decoy pairs.

A decoy is a caption shown with another picture of its fold, scored by the same held-out scorers
as the real pairs (:mod:`mispair.engine.held_out.decoys`): its scores ``F₀`` are the mismatched pairs' on
the collection's own scale. With ``F`` the real pairs' scores and ``π`` the share of mismatched
pairs, ``F = π F₀ + (1 − π) F₁``. On the **null quantile** ``u = F₀(score)`` (the share of decoys
scoring at most the pair; a mismatched pair's ``u`` is uniform on (0, 1], a matched pair's near 1)
the real pairs' distribution is ``G(u) = π u + (1 − π) G₁(u)``, pooled over strata scored alike
(the training pairs, each scored by the repeats' scorers that held it out; the other splits,
scored by every scorer).

- **The share** (Storey 2002):
  ``π̂(λ) = G(λ) / λ`` counts the pairs scoring like the lowest ``λ`` of the decoys; it errs high
  by ``(1 − π) G₁(λ) / λ`` (matched pairs that score as low), less for small ``λ``, whose estimates
  vary more: ``λ`` = :data:`LAMBDA`. The interval resamples the pairs and the decoys (bootstrap):
  its upper end is the estimate's, its lower end the least over ``λ ≤`` :data:`LAMBDA` (a smaller
  ``λ`` errs high less), so a collection with no mismatched pair can read 0.
  :func:`share_bound` is the best-bin upper confidence bound (Garg et al., NeurIPS 2021:
  ``π ≤ G(λ)/λ`` for every ``λ``, a binomial upper limit on ``G``), reported beside the interval
  (``summary.json`` ``calibration.share_upper_bound``).
- **The mismatch probability** of a pair is the local false-discovery rate ``π f₀(s) / f(s) =
  π / g(u)`` (Efron 2001), ``g`` the density of ``u`` fitted non-decreasing (Grenander: the
  slopes of the greatest convex minorant of the empirical ``G``), so it never rises with the
  score, lies in [0, 1], and reaches 1 only where the pairs are as dense as the decoys predict.
- **Drop error rates**: dropping the ``k`` most suspect pairs drops an estimated ``Σ p`` mismatched
  pairs (the probabilities shown), so the share of matched pairs among those dropped (the
  false-discovery rate) is ``1 − mean(p)`` over them, and the share of mismatched pairs among
  those kept ``Σ p / (n − k)`` over the rest; a pair's q-value is the least false-discovery rate
  of a cut that drops it (Storey & Tibshirani 2003), the target–decoy reading of proteomics
  (Elias & Gygi 2007).
- **No cut without a mismatched pair**: where the share's interval reaches 0 (the collection
  cannot be told from one without any mismatched pair at the stated level), no cut is supported
  and every q-value is 1, so nothing is suspected at any ``--fdr`` (a global test before the
  pairs' own, as in hierarchical testing); the probabilities still rank the pairs. On the clean
  collections of ``benchmarks/audit_calibration.py`` (Tux Paint, OpenClipart, two icon themes)
  the interval reached 0 and 1–4 correct pairs (up to 1.3%) had been suspected; on every dirty
  one but the near misses it stayed above 0.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta

LAMBDAS = np.round(np.arange(0.1, 0.55, 0.05), 2)
"""The ``λ`` grid of the share's estimate (shares of the decoys)."""

LAMBDA = 0.3
"""The ``λ`` of the share's point estimate, chosen on the dev collections of
``benchmarks/audit_calibration.py`` (Tux Paint at 30% and 50% swapped, icons at 15% and 40%, seeds
10 and 11; mean absolute error 0.021 against 0.027 at 0.25 and 0.059 at 0.15: a smaller ``λ``
counts fewer pairs and varies more, a larger one counts correct pairs that score low)."""

RESAMPLES = 200
"""Bootstrap resamples for ``λ`` and the interval."""

MIN_DECOYS = 20
"""Fewer decoys than this give no calibration (the share and probabilities are unknown)."""

WEAK_SEPARATION = 0.75
"""Below this estimated AUC of the matched pairs against the decoys the audit says the held-out
models barely tell them apart."""


@dataclass(frozen=True)
class Stratum:
    """Pairs scored alike: ``score [n]`` and their decoys' ``null [m]`` (higher = more matched)."""

    score: np.ndarray
    null: np.ndarray


@dataclass(frozen=True)
class Calibration:
    """The calibrated numbers of ``n`` pairs (in the order of the strata given).

    ``share`` the estimated share of pairs as unrelated as a caption taken from another picture,
    ``share_low``/``share_high`` its ``level`` interval; ``mismatch_probability [n]``;
    ``q_value [n]``: the least estimated false-discovery rate of a cut that drops the pair (1
    for every pair where ``share_low`` is 0: no cut is supported);
    ``null_quantile [n]``: ``u``; ``decoys``: how many; ``separation_auc``: the estimated AUC of
    the matched pairs against the decoys (``(AUC(real, decoys) − π / 2) / (1 − π)``), how well
    the ranking can tell them apart; ``lam``: the ``λ`` chosen.
    """

    share: float
    share_low: float
    share_high: float
    level: float
    mismatch_probability: np.ndarray
    q_value: np.ndarray
    null_quantile: np.ndarray
    decoys: int
    separation_auc: float
    lam: float
    share_bound: float
    """:func:`share_bound` at ``1 − level``: an upper confidence bound that needs no assumption
    on how the matched pairs score (only that mismatched pairs score like the decoys)."""

    def suspected(self, fdr: float) -> np.ndarray:
        """``[n]`` bool: the pairs an estimated false-discovery rate of ``fdr`` drops."""
        return self.q_value <= fdr

    def threshold(self, fdr: float) -> float:
        """The least mismatch probability of the pairs :meth:`suspected` drops (1.0 where it
        drops none): a pair is suspected exactly when its probability reaches it."""
        suspected = self.suspected(fdr)
        return float(self.mismatch_probability[suspected].min()) if suspected.any() else 1.0

    def drop_errors(self, dropped: np.ndarray) -> tuple[float, float]:
        """``(matched among dropped, mismatched among kept)``: the estimated shares, for the
        ``dropped [n]`` pairs (bool)."""
        return drop_errors(self.mismatch_probability, dropped)


def null_quantiles(score: np.ndarray, null: np.ndarray) -> np.ndarray:
    """``[n]``: each score's rank among the decoys ``null [m]``, ``(#{null ≤ s} + 1) / (m + 1)``
    (a mismatched pair, exchangeable with the decoys, is uniform on ``{1, …, m + 1} / (m + 1)``)."""
    ordered = np.sort(np.asarray(null, dtype=np.float64))
    return (np.searchsorted(ordered, np.asarray(score, dtype=np.float64), side="right") + 1) / (
        len(ordered) + 1
    )


def share_at(u: np.ndarray, lams: np.ndarray = LAMBDAS) -> np.ndarray:
    """``[len(lams)]``: ``π̂(λ) = #{u ≤ λ} / (n λ)`` at each ``λ``."""
    u = np.sort(u)
    return np.searchsorted(u, lams, side="right") / (len(u) * lams)


def increasing_density(u: np.ndarray) -> np.ndarray:
    """``[n]``: the Grenander estimate of a non-decreasing density on (0, 1] at each ``u``: the
    slope of the greatest convex minorant of the empirical CDF over the segment holding it."""
    order = np.argsort(u, kind="stable")
    x = np.concatenate([[0.0], u[order]])
    y = np.arange(len(x)) / len(u)
    hull = [0]
    for k in range(1, len(x)):  # the lower convex hull, left to right
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (y[b] - y[a]) * (x[k] - x[a]) >= (y[k] - y[a]) * (x[b] - x[a]):
                hull.pop()  # b lies on or above the chord from a to k
            else:
                break
        hull.append(k)
    density = np.empty(len(u))
    for a, b in itertools.pairwise(hull):
        width = x[b] - x[a]
        slope = (y[b] - y[a]) / width if width > 0 else np.inf
        density[order[a:b]] = slope  # data points a+1..b (0-based a..b-1) on this segment
    return _tied_alike(u[order], density, order)


def _tied_alike(ordered: np.ndarray, density: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Equal ``u`` (pairs scoring above every decoy all read 1) share one density, their
    greatest: the hull reaches a run of ties by a finite slope at its first point and climbs it
    with infinite ones, which would set the first of equal pairs apart from the others."""
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    greatest = np.maximum.reduceat(density[order], starts)
    shared = np.empty(len(density))
    shared[order] = np.repeat(greatest, np.diff(np.r_[starts, len(ordered)]))
    return shared


def local_fdr(u: np.ndarray, share: float) -> np.ndarray:
    """``[n]``: ``min(1, π / g(u))``, non-increasing in ``u``."""
    density = increasing_density(u)
    with np.errstate(divide="ignore"):
        return np.clip(share / density, 0.0, 1.0)


def drop_errors(probability: np.ndarray, dropped: np.ndarray) -> tuple[float, float]:
    """``(1 − mean p over dropped, mean p over kept)``: the estimated share of matched pairs
    among the ``dropped`` and of mismatched pairs among the kept."""
    dropped = np.asarray(dropped, dtype=bool)
    false_drops = float(1 - probability[dropped].mean()) if dropped.any() else 0.0
    kept_mismatched = float(probability[~dropped].mean()) if (~dropped).any() else 0.0
    return false_drops, kept_mismatched


def q_values(probability: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``[n]``: for each pair, the least estimated false-discovery rate ``1 − mean(p)`` over the
    cuts that drop it (the most suspect first, by ``u``; pairs of equal probability dropped
    together, so that ``q ≤ α`` is ``p ≥`` some threshold). ``probability`` must not rise with
    ``u`` (:func:`local_fdr`)."""
    order = np.argsort(u, kind="stable")
    ordered = probability[order]  # non-increasing: equal probabilities are dropped together
    fdr = 1 - np.cumsum(ordered) / np.arange(1, len(u) + 1)
    last_of_tie = np.searchsorted(-ordered, -ordered, side="right") - 1
    fdr = fdr[last_of_tie]
    best_after = np.minimum.accumulate(fdr[::-1])[::-1]
    q = np.empty(len(u))
    q[order] = np.clip(best_after, 0.0, 1.0)
    return q


def calibrate(
    strata: Sequence[Stratum],
    *,
    level: float = 0.95,
    lam: float = LAMBDA,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Calibration | None:
    """The :class:`Calibration` of the pairs of ``strata`` (module docstring), or None with fewer
    than :data:`MIN_DECOYS` decoys."""
    strata = [s for s in strata if len(s.score)]
    if sum(len(s.null) for s in strata) < MIN_DECOYS or any(len(s.null) == 0 for s in strata):
        return None
    u = np.concatenate([null_quantiles(s.score, s.null) for s in strata])
    rng = np.random.default_rng(seed)
    boot = np.minimum(np.stack([share_at(_resampled_u(strata, rng)) for _ in range(resamples)]), 1.0)
    best = int(np.argmin(np.abs(LAMBDAS - lam)))
    share = float(min(share_at(u)[best], 1.0))
    lows = np.quantile(boot[:, : best + 1], (1 - level) / 2, axis=0)
    low, high = float(lows.min()), float(np.quantile(boot[:, best], (1 + level) / 2))
    probability = local_fdr(u, share)
    real = np.concatenate([s.score for s in strata])
    null = np.concatenate([s.null for s in strata])
    share_low = float(min(low, share))
    return Calibration(
        share=share,
        share_low=share_low,
        share_high=float(max(high, share)),
        level=level,
        mismatch_probability=probability,
        q_value=q_values(probability, u) if share_low > 0 else np.ones(len(u)),
        null_quantile=u,
        decoys=len(null),
        separation_auc=_separation(real, null, share),
        lam=float(LAMBDAS[best]),
        share_bound=min(share_bound(u, 1 - level), 1.0),
    )


def share_bound(u: np.ndarray, alpha: float, lams: np.ndarray = LAMBDAS) -> float:
    """The best-bin upper confidence bound ``min_λ U(#{u ≤ λ}) / λ``: ``U`` the Clopper–Pearson
    upper limit at ``1 − alpha / len(lams)`` (a union over the grid)."""
    n = len(u)
    counts = np.searchsorted(np.sort(u), lams, side="right")
    upper = np.where(counts < n, beta.ppf(1 - alpha / len(lams), counts + 1, n - counts), 1.0)
    return float(np.min(upper / lams))


def _resampled_u(strata: Sequence[Stratum], rng: np.random.Generator) -> np.ndarray:
    parts = []
    for s in strata:
        score = rng.choice(s.score, size=len(s.score), replace=True)
        null = rng.choice(s.null, size=len(s.null), replace=True)
        parts.append(null_quantiles(score, null))
    return np.concatenate(parts)


def _separation(real: np.ndarray, null: np.ndarray, share: float) -> float:
    """``(AUC(real above decoys) − π / 2) / (1 − π)``, clipped to [0.5, 1]."""
    from sklearn.metrics import roc_auc_score

    labels = np.concatenate([np.ones(len(real)), np.zeros(len(null))])
    measured = roc_auc_score(labels, np.concatenate([real, null]))
    if share >= 1:
        return 0.5
    return float(np.clip((measured - share / 2) / (1 - share), 0.5, 1.0))

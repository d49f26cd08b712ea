"""How far the ranking can be trusted, on the person's own judgements: the ranking's AUC on the
judged pairs (DeLong's interval), and the scorer's recall on the person's notion of a mismatch
(of the pairs judged mismatched, the share the audit suspected; Wilson's interval). Where the
answers say many pairs are mismatched but the scores find few of them — a near miss, or a kind
of error the scores do not see — the headline says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mispair.estimate.share import Z_975


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float

    def to_list(self) -> list[float]:
        return [self.low, self.high]


def ranking_auc(
    probability: np.ndarray, mismatched: np.ndarray, weights: np.ndarray | None = None
) -> Interval | None:
    """The AUC of ``probability`` ``[n]`` against the judgements ``mismatched`` ``[n]`` (bool)
    with DeLong's 95% interval (DeLong, DeLong & Clarke-Pearson 1988: the variance from the
    structural components of the two classes; ties count a half), its variance at least
    :func:`hanley_mcneil`'s. None with fewer than two of either kind.

    ``weights`` ``[n]``: each judged pair's inverse inclusion probability (``N_h / n_h`` of its
    stratum, :mod:`mispair.estimate.design`), so that a stratified sample, which over-samples the
    suspects, estimates the collection's AUC: each pair of a mismatched and a correct pair counts
    ``w_i w_j`` (the Horvitz–Thompson form of the Mann–Whitney statistic), and the class sizes in
    the variance are Kish's effective sizes ``(Σ w)² / Σ w²``. Equal weights: the plain AUC."""
    f = np.asarray(probability, dtype=np.float64)
    y = np.asarray(mismatched, dtype=bool)
    w = np.ones(len(f)) if weights is None else np.asarray(weights, dtype=np.float64)
    pos, neg, wp, wn = f[y], f[~y], w[y], w[~y]
    if len(pos) < 2 or len(neg) < 2:
        return None
    wins = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = wins @ wn / wn.sum(), wp @ wins / wp.sum()  # per mismatched pair, per correct pair
    auc = float(wp @ v10 / wp.sum())
    n_pos, n_neg = _effective(wp), _effective(wn)
    variance = _weighted_var(v10, wp) / n_pos + _weighted_var(v01, wn) / n_neg
    floor = hanley_mcneil(auc * n_pos * n_neg / (n_pos * n_neg + 1), n_pos, n_neg)
    half = Z_975 * math.sqrt(max(variance, floor))
    return Interval(auc, max(auc - half, 0.0), min(auc + half, 1.0))


def _effective(weights: np.ndarray) -> float:
    """Kish's effective sample size ``(Σ w)² / Σ w²`` (the count, for equal weights)."""
    return float(weights.sum() ** 2 / (weights**2).sum())


def _weighted_var(values: np.ndarray, weights: np.ndarray) -> float:
    """The weighted variance with the effective size's Bessel correction (``np.var(ddof=1)`` for
    equal weights)."""
    mean = float(weights @ values / weights.sum())
    n = _effective(weights)
    return float(weights @ (values - mean) ** 2 / weights.sum()) * n / (n - 1) if n > 1 else 0.0


def hanley_mcneil(auc: float, positives: float, negatives: float) -> float:
    """The AUC's variance under Hanley & McNeil's exponential model (Radiology 1982):
    ``(A(1−A) + (n₁−1)(Q₁−A²) + (n₀−1)(Q₂−A²)) / (n₁n₀)`` with ``Q₁ = A/(2−A)``,
    ``Q₂ = 2A²/(1+A)``. A floor under DeLong's variance, taken at the AUC shrunk by one
    pseudo-pair: a small sample that happens to separate perfectly has a DeLong variance of 0."""
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    return (auc * (1 - auc) + (positives - 1) * (q1 - auc**2) + (negatives - 1) * (q2 - auc**2)) / (
        positives * negatives
    )


def wilson(successes: float, trials: float) -> Interval | None:
    """The share ``successes / trials`` with Wilson's 95% score interval (None without trials);
    weighted counts scaled to an effective number of trials are taken as they are."""
    if trials <= 0:
        return None
    p, z2 = successes / trials, Z_975**2
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = Z_975 * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials**2)) / (1 + z2 / trials)
    return Interval(p, max(centre - half, 0.0), min(centre + half, 1.0))


BLIND_SPOT_RECALL = 0.5
"""Below this recall's upper bound (of the pairs judged mismatched, the share suspected), with a
share whose interval is clear of zero, the headline says the audit missed the mismatches."""
BLIND_SPOT_AUC = 0.8
"""...and below this AUC's upper bound, that the scores cannot see them (else: that the audit's
cut was too cautious, and the labelled drop finds them)."""


def weighted_recall(suspected: np.ndarray, weights: np.ndarray) -> Interval | None:
    """Of the pairs judged mismatched (``suspected [m]`` whether the audit suspected each, with
    their ``weights [m]``, inverse inclusion probabilities), the collection's share the audit
    suspected: the weighted share with Wilson's interval at the effective count."""
    w = np.asarray(weights, dtype=np.float64)
    if not len(w):
        return None
    share = float(w @ np.asarray(suspected, dtype=np.float64) / w.sum())
    n = _effective(w)
    return wilson(share * n, n)


def blind_spot(share_low: float, share: float, recall: Interval | None, auc: Interval | None) -> str | None:
    """The headline's warning when the answers say pairs are mismatched that the audit did not
    suspect (``share_low`` above zero, the recall's upper bound below :data:`BLIND_SPOT_RECALL`):
    a cut too cautious for this collection only where the answers prove its ranking good (the
    AUC's lower bound at least :data:`BLIND_SPOT_AUC`); a blind spot of the scores where the
    ranking on the answers is weak (its upper bound below it, or too few answers of a kind to
    measure it); else that the answers cannot yet tell which. None when the audit found them."""
    if recall is None or share_low <= 0 or recall.high >= BLIND_SPOT_RECALL:
        return None
    if auc is not None and auc.low >= BLIND_SPOT_AUC:
        return (
            f"the audit suspected only {recall.value:.0%} of the pairs you judged mismatched, though "
            f"its ranking places them high (AUC {auc.value:.2f}, at least {auc.low:.2f}): its cut is "
            "cautious here; `mispair estimate --fdr 0.1` drops with your answers"
        )
    if auc is None or auc.high < BLIND_SPOT_AUC:
        return (
            f"your answers say about {share:.0%} of the pairs are mismatched; the scores find few of "
            f"them (the audit suspected {recall.value:.0%} of those you judged mismatched): a near "
            "miss or a kind of error the scores do not see; review by another means"
        )
    return (
        f"the audit suspected only {recall.value:.0%} of the pairs you judged mismatched, and its "
        f"ranking on your answers (AUC {auc.value:.2f}, {auc.low:.2f}–{auc.high:.2f}) cannot yet tell "
        "a cautious cut from errors the scores do not see: more answers tell"
    )

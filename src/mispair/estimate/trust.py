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


def ranking_auc(probability: np.ndarray, mismatched: np.ndarray) -> Interval | None:
    """The AUC of ``probability`` ``[n]`` against the judgements ``mismatched`` ``[n]`` (bool)
    with DeLong's 95% interval (DeLong, DeLong & Clarke-Pearson 1988: the variance from the
    structural components of the two classes; ties count a half), its variance at least
    :func:`hanley_mcneil`'s. None with fewer than two of either kind."""
    f = np.asarray(probability, dtype=np.float64)
    y = np.asarray(mismatched, dtype=bool)
    pos, neg = f[y], f[~y]
    if len(pos) < 2 or len(neg) < 2:
        return None
    wins = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    auc = float(wins.mean())
    v10, v01 = wins.mean(axis=1), wins.mean(axis=0)  # per mismatched pair, per correct pair
    variance = float(np.var(v10, ddof=1) / len(pos) + np.var(v01, ddof=1) / len(neg))
    floor = hanley_mcneil(auc * len(pos) * len(neg) / (len(pos) * len(neg) + 1), len(pos), len(neg))
    half = Z_975 * math.sqrt(max(variance, floor))
    return Interval(auc, max(auc - half, 0.0), min(auc + half, 1.0))


def hanley_mcneil(auc: float, positives: int, negatives: int) -> float:
    """The AUC's variance under Hanley & McNeil's exponential model (Radiology 1982):
    ``(A(1−A) + (n₁−1)(Q₁−A²) + (n₀−1)(Q₂−A²)) / (n₁n₀)`` with ``Q₁ = A/(2−A)``,
    ``Q₂ = 2A²/(1+A)``. A floor under DeLong's variance, taken at the AUC shrunk by one
    pseudo-pair: a small sample that happens to separate perfectly has a DeLong variance of 0."""
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    return (auc * (1 - auc) + (positives - 1) * (q1 - auc**2) + (negatives - 1) * (q2 - auc**2)) / (
        positives * negatives
    )


def wilson(successes: int, trials: int) -> Interval | None:
    """The share ``successes / trials`` with Wilson's 95% score interval (None without trials)."""
    if trials == 0:
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


def blind_spot(share_low: float, share: float, recall: Interval | None, auc: Interval | None) -> str | None:
    """The headline's warning when the answers say pairs are mismatched that the audit did not
    suspect (``share_low`` above zero, the recall's upper bound below :data:`BLIND_SPOT_RECALL`):
    a blind spot of the scores when the ranking on the answers is weak too (the AUC's upper
    bound below :data:`BLIND_SPOT_AUC`, or too few answers of a kind to measure it), else a cut
    too cautious for this collection. None when the audit found them."""
    if recall is None or share_low <= 0 or recall.high >= BLIND_SPOT_RECALL:
        return None
    if auc is not None and auc.high >= BLIND_SPOT_AUC:
        return (
            f"the audit suspected only {recall.value:.0%} of the pairs you judged mismatched, though "
            f"its ranking places them high (AUC {auc.value:.2f}): its cut is cautious here; "
            "`mispair estimate --fdr 0.1` drops with your answers"
        )
    return (
        f"your answers say about {share:.0%} of the pairs are mismatched; the scores find few of "
        f"them (the audit suspected {recall.value:.0%} of those you judged mismatched): a near miss "
        "or a kind of error the scores do not see; review by another means"
    )

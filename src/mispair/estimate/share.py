"""The mismatched share from a random sample a person judged, with the audit's probabilities as
predictions: prediction-powered inference (PPI++), with an interval that stays valid however the
person decides when to stop.

The population is the audit's ``N`` pairs, each with a calibrated mismatch probability ``f_i``;
a person judges the first ``n`` pairs of a uniformly random order (``sample.csv``), ``y_i = 1``
when mismatched. For any fixed ``λ`` the estimate

    θ̂ = λ · F̄ + (1/n) Σ_{i ≤ n} (y_i − λ f_i),      F̄ = (1/N) Σ_{i ≤ N} f_i

is unbiased for the share ``θ = (1/N) Σ y_i`` (the sample is uniform and ``F̄`` is known exactly:
every pair was scored), whatever the probabilities' quality: a weak scorer only widens the
interval (Angelopoulos et al., *Prediction-powered inference*, Science 2023; PPI++:
Angelopoulos, Duchi & Zrnic, arXiv 2311.01453, power-tuned ``λ``).

**The interval the page shows** (:func:`anytime_share`) is an asymptotic confidence sequence
(Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas, *Time-uniform central limit theory and
asymptotic confidence sequences*, Ann. Statist. 2024, Thm 2.2, the Robbins normal mixture; used
with PPI as in Kilian et al.'s *anytime-valid PPI*, 2025): with ``v̂`` the residuals'
variance,

    θ̂_n ± sqrt(v̂_n) · sqrt( 2(nρ² + 1) / (n²ρ²) · log( sqrt(nρ² + 1) / α ) ),

which holds at every ``n`` at once with probability about ``1 − α``, so a person may watch it and
stop when it is tight. ``ρ`` is tuned for the width at ``n = TUNED_FOR`` answers. Two guards for
small samples, where the asymptotics are weakest: the variance is taken with two pseudo-answers,
one correct and one mismatched, each predicted ``F̄`` (as Agresti–Coull add to a proportion), so
a run of identical first answers never gives a zero width; and ``λ`` is the minimiser of that
variance over ``[0, 1]``, so the interval is never wider than the labels-only one
(``λ = 0``, :func:`labels_only_share`). Sampling without replacement only lowers the variance
(the finite-population correction is left out: conservative).

**The fixed-n interval** (:func:`fixed_n_share`) is ``ppi-python``'s ``ppi_mean_ci`` computed
here (the same ``λ``, the same interval; tested against it): valid for a sample size decided in
advance, reported beside the anytime one.

``unsure`` answers keep their place in the sample (dropping them would bias it): the interval is
the union of the intervals with every unsure answer read as correct and as mismatched, and the
estimate their midpoint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ALPHA = 0.05
"""One minus the intervals' confidence level."""
TUNED_FOR = 100
"""The number of answers at which the confidence sequence is tightest for its level (its ``ρ``)."""
Z_975 = 1.959963984540054
"""The standard normal's 97.5% quantile (the fixed-n 95% interval)."""


@dataclass(frozen=True)
class ShareEstimate:
    """A share with its interval: ``share`` (the point estimate), ``low``/``high`` (the interval,
    clipped to [0, 1]), ``lam`` (the PPI weight of the predictions: 0 labels only, 1 plain PPI),
    ``std`` (the per-answer standard deviation the interval scales), ``answers``."""

    share: float
    low: float
    high: float
    lam: float
    std: float
    answers: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def boundary(answers: int, alpha: float = ALPHA, tuned_for: int = TUNED_FOR) -> float:
    """The confidence sequence's half-width per unit standard deviation after ``answers``:
    ``sqrt(2(tρ²+1)/(t²ρ²) · log(sqrt(tρ²+1)/α))`` with ``ρ² = (−2 log α + log(−2 log α + 1)) /
    tuned_for`` (Waudby-Smith et al. 2024, eq. 12 and the ρ that minimises the width at
    ``tuned_for``)."""
    t = float(answers)
    rho2 = (-2 * math.log(alpha) + math.log(-2 * math.log(alpha) + 1)) / tuned_for
    return math.sqrt(2 * (t * rho2 + 1) / (t * t * rho2) * math.log(math.sqrt(t * rho2 + 1) / alpha))


def anytime_share(
    judged: np.ndarray, predicted: np.ndarray, mean_predicted: float, *, power: bool = True
) -> ShareEstimate:
    """The share of mismatched pairs with its anytime-valid interval (the module's formula).

    Args:
        judged: ``[n]`` the person's answers in sample order, 1 mismatched, 0 correct (firm).
        predicted: ``[n]`` the audit's mismatch probabilities of those pairs.
        mean_predicted: ``F̄``, the mean mismatch probability over every pair of the audit.
        power: False for the labels-only interval (``λ = 0``).
    """
    y, f = np.asarray(judged, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    n = len(y)
    if n == 0:
        return ShareEstimate(float(mean_predicted), 0.0, 1.0, 1.0, float("nan"), 0)
    # two pseudo-answers (0 and 1, both predicted F̄) in every moment
    ys, fs = _sum(y) + 1.0, _sum(f) + 2 * mean_predicted
    m = n + 2
    my, mf = ys / m, fs / m
    dy = [v - my for v in y] + [-my, 1.0 - my]
    df = [v - mf for v in f] + [mean_predicted - mf] * 2
    syy = _dot(dy, dy)
    sff = _dot(df, df)
    syf = _dot(dy, df)
    lam = min(max(syf / sff, 0.0), 1.0) if power and sff > 0 else 0.0
    variance = (syy - 2 * lam * syf + lam * lam * sff) / (m - 1)
    share = lam * mean_predicted + (_sum(y) - lam * _sum(f)) / n
    std = math.sqrt(max(variance, 0.0))
    half = std * boundary(n)
    return ShareEstimate(float(share), max(share - half, 0.0), min(share + half, 1.0), float(lam), std, n)


def labels_only_share(judged: np.ndarray, mean_predicted: float) -> ShareEstimate:
    """The same confidence sequence from the answers alone (``λ = 0``): what the sample says
    without the audit's scores."""
    return anytime_share(judged, np.zeros(len(judged)), mean_predicted, power=False)


def fixed_n_share(judged: np.ndarray, predicted: np.ndarray, everything: np.ndarray) -> ShareEstimate:
    """PPI++'s interval for a sample size fixed in advance, as ``ppi_py.ppi_mean_ci`` computes it
    (``alpha`` 0.05, ``lam`` power-tuned and clipped to [0, 1], the predictions of every pair,
    ``everything`` ``[N]``, as the unlabelled set): ``λ = cov(y, f) / ((1 + n/N) var(f ∪ F))``,
    the estimate ``λ mean(F) + mean(y − λ f)``, ``± z sqrt(var(λF)/N + var(y − λf)/n)``."""
    y, f = np.asarray(judged, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    unlabelled = np.asarray(everything, dtype=np.float64)
    n, big = len(y), len(unlabelled)
    if n < 2:
        return ShareEstimate(float(unlabelled.mean()), 0.0, 1.0, 1.0, float("nan"), n)
    covariance = float(np.mean((y - y.mean()) * (f - f.mean())))
    spread = float(np.var(np.concatenate([f, unlabelled]), ddof=1))
    lam = min(max(covariance / ((1 + n / big) * spread), 0.0), 1.0) if spread > 0 else 0.0
    share = float(np.mean(lam * unlabelled) + np.mean(y - lam * f))
    std = math.sqrt(float(np.std(lam * unlabelled)) ** 2 / big + float(np.std(y - lam * f)) ** 2 / n)
    half = Z_975 * std
    return ShareEstimate(share, max(share - half, 0.0), min(share + half, 1.0), lam, std * math.sqrt(n), n)


def answers_for(std: float, half_width: float, answers: int, most: int) -> int | None:
    """The fewest answers (at least ``answers``, at most ``most``) at which an interval of
    per-answer standard deviation ``std`` is within ``± half_width``; None when ``most`` do not
    reach it. (The boundary falls with the count past its first few values; the search walks
    the counts by doubling, then halves back.)"""
    if not std > 0:
        return answers
    start = max(answers, 1)
    if std * boundary(start) <= half_width:
        return start
    high = start
    while std * boundary(high) > half_width:
        if high >= most:
            return None
        high = min(high * 2, most)
    low = high // 2 if high // 2 >= start else start
    while high - low > 1:
        middle = (low + high) // 2
        if std * boundary(middle) <= half_width:
            high = middle
        else:
            low = middle
    return high


def _sum(values: np.ndarray | list[float]) -> float:
    """A left-to-right sum, as the page's script adds (equal to it to the last bit)."""
    total = 0.0
    for value in values:
        total += float(value)
    return total


def _dot(a: list[float], b: list[float]) -> float:
    total = 0.0
    for x, y in zip(a, b):
        total += x * y
    return total


TARGET_HALF_WIDTH = 0.03
"""The interval's half-width the page counts the answers for ("± 3 points")."""


@dataclass(frozen=True)
class SampleShare:
    """What a judged sample says of the share: ``estimate`` (PPI, anytime interval),
    ``labels_only`` (the answers alone, the same interval), ``fixed_n`` (PPI++'s interval for a
    size fixed in advance), each the union over the ways to read the ``unsure`` answers;
    ``answers`` (all, unsure included), ``mismatched``/``correct``/``unsure`` (their counts),
    ``answers_for_target``: the answers at which the interval would be within ±
    :data:`TARGET_HALF_WIDTH` at the residuals' present spread (None: not within the
    collection's pairs)."""

    estimate: ShareEstimate
    labels_only: ShareEstimate
    fixed_n: ShareEstimate
    answers: int
    mismatched: int
    correct: int
    unsure: int
    answers_for_target: int | None


def sample_share(answers: np.ndarray, predicted: np.ndarray, everything: np.ndarray) -> SampleShare:
    """The share from ``answers`` ``[n]`` (1 mismatched, 0 correct, NaN unsure; the first ``n``
    pairs of the sample order), their ``predicted`` mismatch probabilities ``[n]`` and those of
    every pair of the audit, ``everything`` ``[N]``."""
    judged = np.asarray(answers, dtype=np.float64)
    unsure = np.isnan(judged)
    mean_predicted = float(np.mean(np.asarray(everything, dtype=np.float64)))
    low_read, high_read = np.where(unsure, 0.0, judged), np.where(unsure, 1.0, judged)
    if len(judged) == len(everything):  # every pair judged: the share is known (but for the unsure)
        ppi = alone = _union(*(_exact(read) for read in (low_read, high_read)))
    else:
        ppi = _union(*(anytime_share(read, predicted, mean_predicted) for read in (low_read, high_read)))
        alone = _union(*(labels_only_share(read, mean_predicted) for read in (low_read, high_read)))
    fixed = _union(*(fixed_n_share(read, predicted, everything) for read in (low_read, high_read)))
    needed = answers_for(ppi.std, TARGET_HALF_WIDTH, len(judged), len(everything))
    firm = judged[~unsure]
    mismatched = int(firm.sum())
    correct, doubtful = len(firm) - mismatched, int(unsure.sum())
    return SampleShare(ppi, alone, fixed, len(judged), mismatched, correct, doubtful, needed)


def _exact(judged: np.ndarray) -> ShareEstimate:
    """Every pair judged: the share itself, an interval of no width."""
    share = _sum(judged) / len(judged)
    return ShareEstimate(share, share, share, 0.0, 0.0, len(judged))


def _union(low_read: ShareEstimate, high_read: ShareEstimate) -> ShareEstimate:
    """One interval for the two readings of the unsure answers (all correct, all mismatched):
    from the lower's low to the higher's high, the estimate between their estimates, the larger
    spread."""
    return ShareEstimate(
        (low_read.share + high_read.share) / 2,
        min(low_read.low, high_read.low),
        max(low_read.high, high_read.high),
        (low_read.lam + high_read.lam) / 2,
        max(low_read.std, high_read.std),
        low_read.answers,
    )

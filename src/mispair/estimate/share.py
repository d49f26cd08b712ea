"""The mismatched share from a random sample a person judged, with an interval that stays valid
however the person decides when to stop.

**What the audit's sample uses** is the stratified estimate (:func:`stratified_share`, over the
order of :mod:`mispair.estimate.design`): the strata's answers weighed by their sizes, a
confidence sequence credited for sampling without replacement, and a planned look.
:func:`sample_share` is it. The uniform-order PPI++ estimate below (:func:`anytime_share`,
:func:`fixed_n_share`) is what wave 5 used; the benchmarks keep it as the reference the design
is measured against.

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


def answers_for(
    std: float, half_width: float, answers: int, most: int, *, alpha: float = ALPHA
) -> int | None:
    """The fewest answers (at least ``answers``, at most ``most``) at which an interval of
    per-answer standard deviation ``std`` is within ``± half_width``; None when ``most`` do not
    reach it. (The boundary falls with the count past its first few values; the search walks
    the counts by doubling, then halves back.)"""
    if not std > 0:
        return answers
    start = max(answers, 1)
    if std * boundary(start, alpha) <= half_width:
        return start
    high = start
    while std * boundary(high, alpha) > half_width:
        if high >= most:
            return None
        high = min(high * 2, most)
    low = high // 2 if high // 2 >= start else start
    while high - low > 1:
        middle = (low + high) // 2
        if std * boundary(middle, alpha) <= half_width:
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


def sample_share(answers: np.ndarray, order_probability: np.ndarray, order_strata: np.ndarray) -> SampleShare:
    """The share from ``answers`` ``[n]`` (1 mismatched, 0 correct, NaN unsure) to the first ``n``
    pairs of the sample order, with every pair's mismatch probability ``order_probability``
    ``[N]`` and stratum ``order_strata`` ``[N]`` in that order (:func:`stratified_share`; the
    labels-only figure is the same: under the stratified design the answers are weighed by their
    strata either way)."""
    judged = np.asarray(answers, dtype=np.float64)
    unsure = np.isnan(judged)
    low_read, high_read = np.where(unsure, 0.0, judged), np.where(unsure, 1.0, judged)
    everything = np.asarray(order_probability, dtype=np.float64)
    if len(judged) == len(everything):  # every pair judged: the share is known (but for the unsure)
        ppi = fixed = _union(*(_exact(read) for read in (low_read, high_read)))
    else:
        reads = [stratified_share(read, everything, order_strata) for read in (low_read, high_read)]
        ppi = _union(reads[0][0], reads[1][0])
        fixed = _union(reads[0][1], reads[1][1])
    needed = answers_for_design(ppi, everything, order_strata, np.where(unsure, 0.5, judged))
    firm = judged[~unsure]
    mismatched = int(firm.sum())
    correct, doubtful = len(firm) - mismatched, int(unsure.sum())
    return SampleShare(ppi, ppi, fixed, len(judged), mismatched, correct, doubtful, needed)


def answers_for_design(
    estimate: ShareEstimate,
    order_probability: np.ndarray,
    order_strata: np.ndarray,
    answers: np.ndarray | None = None,
) -> int | None:
    """The answers at which the interval is expected within ± :data:`TARGET_HALF_WIDTH`: the
    present count when the ``estimate``'s interval already is; the planned look when it is still
    ahead and predicted to reach it (from the ``answers`` ``[n]`` so far, unsure ones 0.5, where a
    stratum has some: :func:`predicted_half_width`); else the confidence sequence's count at the
    present per-answer deviation (:func:`answers_for`, its level ``ALPHA − LOOK_ALPHA``); None
    when not within the collection's pairs."""
    answers_so_far, big = estimate.answers, len(order_probability)
    if answers_so_far >= big or (answers_so_far and estimate.half_width <= TARGET_HALF_WIDTH):
        return answers_so_far
    look = planned_look(order_probability, order_strata)
    if answers_so_far < look:
        predicted = predicted_half_width(look, order_probability, order_strata, Z_LOOK, answers)
        if predicted <= PLANNED_FOR:
            return look
    std = estimate.std if estimate.std == estimate.std else 0.5
    return answers_for(std, TARGET_HALF_WIDTH, max(answers_so_far, 1), big, alpha=ALPHA - LOOK_ALPHA)


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


def without_replacement(answers: int, pairs: int) -> float:
    """The without-replacement factor ``κ = n / Σ_{i ≤ n} N/(N − i + 1)`` (≤ 1) by which a
    confidence sequence for the mean of ``pairs`` (``N``) values drawn without replacement is
    narrower than one drawn with replacement after ``answers`` (``n``) draws: the martingale
    ``Σ_i (x_i − μ_i)`` with ``μ_i = (Nμ − Σ_{j<i} x_j)/(N − i + 1)`` the mean of the values not yet
    drawn (Waudby-Smith & Ramdas, *Confidence sequences for sampling without replacement*,
    NeurIPS 2020, §2) is linear in ``μ`` with slope ``Σ_i N/(N − i + 1)``, against ``n`` with
    replacement. Summed left to right, as the page's script does."""
    total = 0.0
    for i in range(1, answers + 1):
        total += pairs / (pairs - i + 1)
    return answers / total if total > 0 else 1.0


@dataclass(frozen=True)
class StratumFigures:
    """One stratum's part of a stratified estimate: ``weight`` (``W_h = N_h / N``), ``pairs``
    (``N_h``), ``answers`` (``n_h``), ``mean`` (its estimated share), ``variance`` (of ``mean``
    for a sample of fixed size, without-replacement credited by ``κ²``), ``fixed_variance`` (the
    same with the finite-population correction ``1 − n_h/N_h``), ``lam``, ``std``."""

    weight: float
    pairs: int
    answers: int
    mean: float
    variance: float
    fixed_variance: float
    lam: float
    std: float


def stratum_figures(judged: np.ndarray, probabilities: np.ndarray, total: int) -> StratumFigures:
    """A stratum's figures from its ``judged`` answers ``[n_h]`` (in sample order) and the
    mismatch probabilities of every pair of the stratum ``[N_h]``; ``total``: the collection's
    ``N``.

    The stratum's share is its answers' mean ``ȳ_h`` (unbiased: the design samples each stratum
    uniformly). Its per-answer variance is Agresti–Coull's ``p̃(1 − p̃)`` with one pseudo-answer each way,
    ``p̃ = (Σ y + 1) / (n_h + 2)``, so a stratum whose first answers are all alike never gets a zero width (a
    stratum of near-certain matches holds rare errors; a Wald variance of 0 there once missed
    the truth in a third of the runs). The probabilities enter through the strata and their
    allocation, not within a stratum: there they vary little, and the power-tuned weight of
    PPI++ came out near 0 in every stratum of the calibration collections. A stratum without
    answers has its mean probability as estimate (the interval spans [0, 1] of it:
    :func:`stratified_share`); one judged whole is exact."""
    big, n = len(probabilities), len(judged)
    weight = big / total
    if n == 0:
        return StratumFigures(
            weight, big, 0, _sum(probabilities) / big, float("nan"), float("nan"), 0.0, float("nan")
        )
    mean = _sum(judged) / n
    if n == big:
        return StratumFigures(weight, big, n, mean, 0.0, 0.0, 0.0, 0.0)
    tilde = (_sum(judged) + 1) / (n + 2)
    spread = tilde * (1 - tilde)
    kappa = without_replacement(n, big)
    return StratumFigures(
        weight, big, n, mean, kappa * kappa * spread / n, (1 - n / big) * spread / n, 0.0, math.sqrt(spread)
    )


LOOK_ALPHA = 0.045
"""The error the planned look spends (:func:`stratified_share`); the confidence sequence spends
the rest of :data:`ALPHA`."""
Z_LOOK = 2.0046544617650968
"""The standard normal's ``1 − LOOK_ALPHA / 2`` quantile: the planned look's two-sided interval."""
PLANNED_FOR = TARGET_HALF_WIDTH
"""The half-width the planned look is placed for ("± 3 points")."""


@dataclass(frozen=True)
class Stratified:
    """A stratified sample's figures after its first ``answers``: the ``share`` (``Σ_h W_h m̂_h``),
    ``seen`` (its part over the strata with answers), ``unseen`` (the weight of those without),
    ``variance`` (``SE²``, without-replacement credited), ``fixed_variance`` (``SE²`` with the
    finite-population correction), ``lam`` (the strata's λ, weighted)."""

    answers: int
    share: float
    seen: float
    unseen: float
    variance: float
    fixed_variance: float
    lam: float

    def interval(self, half: float, std: float) -> ShareEstimate:
        """The share ``± half``, a stratum without answers adding its weight to the high end."""
        low, high = max(self.seen - half, 0.0), min(self.seen + self.unseen + half, 1.0)
        return ShareEstimate(self.share, low, high, self.lam, std, self.answers)


def stratified(answers: np.ndarray, order_probability: np.ndarray, order_strata: np.ndarray) -> Stratified:
    """:class:`Stratified` of the first ``len(answers)`` pairs of the order (see
    :func:`stratified_share` for the arguments)."""
    y = np.asarray(answers, dtype=np.float64)
    f = np.asarray(order_probability, dtype=np.float64)
    strata = np.asarray(order_strata, dtype=object)
    n, total = len(y), len(f)
    parts = []
    for name in dict.fromkeys(strata.tolist()):
        inside = strata == name
        answered = inside[:n]
        parts.append(stratum_figures(y[answered], f[inside], total))
    sampled = [p for p in parts if 0 < p.answers < p.pairs]
    return Stratified(
        n,
        _sum([p.weight * p.mean for p in parts]),
        _sum([p.weight * p.mean for p in parts if p.answers > 0]),
        _sum([p.weight for p in parts if p.answers == 0]),
        _sum([p.weight * p.weight * p.variance for p in sampled]),
        _sum([p.weight * p.weight * p.fixed_variance for p in sampled]),
        _sum([p.weight * p.lam for p in parts]),
    )


def stratified_share(
    answers: np.ndarray, order_probability: np.ndarray, order_strata: np.ndarray
) -> tuple[ShareEstimate, ShareEstimate]:
    """The share from a stratified sample (:mod:`mispair.estimate.design`), with its anytime and
    its fixed-n interval.

    The estimate is ``θ̂ = Σ_h W_h m̂_h``, each stratum's ``m̂_h`` the mean of its answers
    (:func:`stratum_figures`; unbiased under the simple random sampling the design gives within
    each stratum, whatever the probabilities' quality: they decide the strata and how many
    answers each gets, so the predictions power the estimate through the design, as in
    stratified PPI, Fisch et al., *Stratified prediction-powered inference*, NeurIPS 2024, with
    the stratum's weight 0). Its standard error ``SE² = Σ_h W_h² κ_h² s_h² / n_h`` (``κ_h``:
    :func:`without_replacement`) is widened as the confidence sequence widens a
    mean's, at level ``ALPHA − LOOK_ALPHA``: ``± SE · sqrt(n) · boundary(n)``, ``sqrt(n) · SE``
    standing for the per-answer deviation (the schedule keeps every ``n_h`` a fixed share of
    ``n``, so the stratified mean is a weighted sum of per-stratum martingales in the same time).

    **The planned look.** At ``n* = planned_look(...)`` answers (fixed by the probabilities and
    the design before any answer), the fixed-n interval ``± z_{1−LOOK_ALPHA/2} · SE_fpc(n*)``
    (the finite-population correction in place of ``κ``) spends ``LOOK_ALPHA`` of the error; from
    then on the interval shown is the confidence sequence's intersected with that look's. Both
    hold together with probability ``1 − ALPHA`` (a union bound), so the interval stays valid
    wherever the person stops, and at the planned look it is within ``2.00/1.96 ≈ 1.02×`` of the
    fixed-n interval there, where a confidence sequence alone is ``≈ 1.55×`` (a planned look in
    the sense of group-sequential designs: Jennison & Turnbull, *Group sequential methods*,
    2000, ch. 7, with Bonferroni's split between the look and the sequence).

    The fixed-n interval (``± z_{0.975} · SE_fpc(n)``) is valid for a size fixed in advance.
    A stratum with no answer yet adds its weight ``W_h`` to the high end of both.

    Args:
        answers: ``[n]`` the answers to the first ``n`` pairs of the order (1 mismatched, 0 correct).
        order_probability: ``[N]`` every pair's mismatch probability, in sample order.
        order_strata: ``[N]`` every pair's stratum, in sample order.

    Returns:
        ``(anytime, fixed_n)``.
    """
    y = np.asarray(answers, dtype=np.float64)
    n = len(y)
    now = stratified(y, order_probability, order_strata)
    if n == 0:
        nothing = ShareEstimate(now.share, 0.0, 1.0, now.lam, float("nan"), 0)
        return nothing, nothing
    std = math.sqrt(now.variance * n)
    anytime = now.interval(std * boundary(n, ALPHA - LOOK_ALPHA), std)
    look = planned_look(order_probability, order_strata)
    if n >= look:
        then = stratified(y[:look], order_probability, order_strata)
        planned = then.interval(Z_LOOK * math.sqrt(then.fixed_variance), std)
        anytime = ShareEstimate(
            now.share, max(anytime.low, planned.low), min(anytime.high, planned.high), now.lam, std, n
        )
    fixed_n = now.interval(Z_975 * math.sqrt(now.fixed_variance), math.sqrt(now.fixed_variance * n))
    return anytime, fixed_n


def predicted_half_width(
    answers: int,
    order_probability: np.ndarray,
    order_strata: np.ndarray,
    z: float,
    judged: np.ndarray | None = None,
) -> float:
    """The fixed-n half-width ``z · SE_fpc`` the design predicts after ``answers``, each stratum's
    share taken as its mean probability ``F̄_h`` (were the probabilities calibrated) or, where the
    ``judged`` answers so far (``[m]``, the first ``m`` pairs of the order) hold some of the
    stratum, as their mean (so that scores blind to an error do not promise a narrow look), its
    variance Agresti–Coull's as :func:`stratum_figures` takes it
    (:func:`~mispair.estimate.design.predicted_variance`); a stratum without answers counts its
    whole weight."""
    from mispair.estimate.design import predicted_variance

    f = np.clip(np.asarray(order_probability, dtype=np.float64), 0.0, 1.0)
    strata = np.asarray(order_strata, dtype=object)
    seen = np.zeros(0) if judged is None else np.asarray(judged, dtype=np.float64)
    variance, unseen = 0.0, 0.0
    for name in dict.fromkeys(strata.tolist()):
        inside = strata == name
        big, n = int(inside.sum()), int(inside[:answers].sum())
        weight = big / len(f)
        mine = seen[inside[: len(seen)]]
        mean = _sum(mine) / len(mine) if len(mine) else _sum(f[inside]) / big
        if n == 0:
            unseen += weight
        else:
            variance += weight * weight * predicted_variance(big, mean, n)
    return z * math.sqrt(variance) + unseen


def planned_look(order_probability: np.ndarray, order_strata: np.ndarray) -> int:
    """``n*``: the fewest answers (at least :data:`FIRST_LOOK`, at most ``N``) at which the
    planned look's interval is predicted within ± :data:`PLANNED_FOR`
    (:func:`predicted_half_width`), by bisection (the prediction falls with ``n``)."""
    big = len(order_probability)
    low = min(FIRST_LOOK, big)
    if predicted_half_width(low, order_probability, order_strata, Z_LOOK) <= PLANNED_FOR:
        return low
    high = big
    while high - low > 1:
        middle = (low + high) // 2
        if predicted_half_width(middle, order_probability, order_strata, Z_LOOK) <= PLANNED_FOR:
            high = middle
        else:
            low = middle
    return high


FIRST_LOOK = 100
"""The earliest answer count the look is planned at (fewer answers make a poor normal
approximation)."""

"""The drop with an error a person can prove: the largest cut of the audit's ranking whose share
of correct pairs is proven at most ``q`` by the answers inside it (:func:`proven_cut`), and each
pair's probability recalibrated on the answers. (:func:`conformal_selection`, the earlier rule,
stays as a reference in the benchmarks: with a hundred answers its conformal p-values cannot pass
Benjamini–Hochberg over the unjudged pairs, and it dropped only the pairs already judged.)

**The proof.** The design (:mod:`mispair.estimate.design`) samples the ``cut`` stratum (the pairs
the audit suspects) at random without replacement, so among the top ``k`` of the cut's ranking
the ``m_k`` pairs answered are, given ``m_k``, a uniformly random subset: the number judged
correct ``c_k`` is hypergeometric in the unknown number ``C_k`` of correct pairs among the ``k``.
The exact upper bound ``U_k = max{C : P(X ≤ c_k; k, C, m_k) > δ}`` holds ``C_k ≤ U_k`` with
probability at least ``1 − δ``. The cuts ``k_4 < … < k_8`` (``k_j = ⌈N_cut · j / 8⌉``, fixed by the
scores before any answer) are tested in that order, each at the full ``δ``, and the testing stops
at the first cut whose bound ``U_k / k`` exceeds ``q``: fixed-sequence testing, which bounds the
chance that any cut passed with a false-discovery proportion above ``q`` by ``δ``
(Angelopoulos, Bates, Candès, Jordan & Lei, *Learn then test*, 2021, §4; the hypothesis of cut
``k`` is ``FDP_k > q``). The drop is the last cut passed, less the pairs judged correct or unsure
in it, plus every pair judged mismatched: its proportion of correct pairs is at most
``(U_k − c_k) / size`` with probability ``1 − δ``, whatever the scores' quality.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DELTA = 0.1
"""The proof's risk limit: the chance that a drop proven at most ``q`` correct holds more (as in
a risk-limiting audit; the issue's bar is a realized false-discovery proportion ≤ ``q`` in 90% of
reviewers' runs). The exact bounds and the fixed sequence are conservative: on the calibration
collections the realized proportion stayed ≤ ``q`` in ≥ 99% of runs at this limit
(``benchmarks/results/labelled_sample.md``), and a limit of 0.05 found about half as many
mismatched pairs (OpenClipart 20%: 29% against 47%)."""
INTERVAL_DELTA = 0.025
"""The chance each end of the drop's error's interval misses (a two-sided 95% interval, reported
beside the proof; its high end is at least the proven bound)."""
CUT_STEPS = (4, 5, 6, 7, 8)
"""The cuts tested, in eighths of the cut stratum, in testing order."""


@dataclass(frozen=True)
class Selection:
    """``suspected`` ``[N]`` (bool), ``p_values`` ``[N]`` (conformal; a judged pair's as if it
    were not judged), ``threshold`` (the largest p-value selected, or 0 when none is):
    ``p_values > threshold`` are the pairs the rule keeps by their scores."""

    suspected: np.ndarray
    p_values: np.ndarray
    threshold: float


def conformal_selection(probability: np.ndarray, answers: np.ndarray, fdr: float) -> Selection:
    """The pairs to drop at false-discovery rate ``fdr``.

    Args:
        probability: ``[N]`` every pair's suspicion (higher = more suspect; ties are best broken
            beforehand: a tie with a pair judged correct counts against a pair).
        answers: ``[N]`` 1 judged mismatched, 0 judged correct, 0.5 unsure, NaN not judged.
        fdr: the level ``q`` in (0, 1).
    """
    f = np.asarray(probability, dtype=np.float64)
    y = np.asarray(answers, dtype=np.float64)
    judged = ~np.isnan(y)
    calibration = np.sort(f[judged & (y < 1)])  # correct or unsure: the nulls' scores
    n = int(judged.sum())
    # correct judged pairs scoring at least f_j: how many of the sorted scores are >= f_j
    at_least = len(calibration) - np.searchsorted(calibration, f, side="left")
    p = (1.0 + at_least) / (n + 1.0)
    chosen = benjamini_hochberg(p[~judged], fdr)
    suspected = judged & (y == 1)
    suspected[np.flatnonzero(~judged)[chosen]] = True
    threshold = float(p[~judged][chosen].max()) if chosen.any() else 0.0
    return Selection(suspected, p, threshold)


def benjamini_hochberg(p_values: np.ndarray, level: float) -> np.ndarray:
    """``[m]`` bool: the hypotheses Benjamini–Hochberg rejects at ``level`` (the largest ``r``
    with ``p_(r) ≤ level · r / m``; every p-value at most ``p_(r)``)."""
    m = len(p_values)
    if m == 0:
        return np.zeros(0, dtype=bool)
    ordered = np.sort(p_values)
    passing = np.flatnonzero(ordered <= level * np.arange(1, m + 1) / m)
    if not len(passing):
        return np.zeros(m, dtype=bool)
    return p_values <= ordered[passing[-1]]


def recalibrated(probability: np.ndarray, answers: np.ndarray) -> np.ndarray | None:
    """``[N]`` each pair's mismatch probability refitted on the firm answers: a logistic
    regression of the answer on the logit of the audit's probability (Platt scaling: two
    parameters, little to overfit on a hundred answers), the judged pairs given their answer (0
    or 1; unsure ones keep the refit). None when the answers hold one kind only (nothing to
    fit)."""
    f = np.clip(np.asarray(probability, dtype=np.float64), 1e-6, 1 - 1e-6)
    y = np.asarray(answers, dtype=np.float64)
    firm = (y == 0) | (y == 1)
    if len(set(y[firm].tolist())) < 2:
        return None
    logit = np.log(f / (1 - f))
    a, b = platt(logit[firm], y[firm])
    return np.where(firm, y, 1 / (1 + np.exp(-(a * logit + b))))


def platt(x: np.ndarray, y: np.ndarray, *, ridge: float = 1e-4, steps: int = 50) -> tuple[float, float]:
    """``(a, b)`` of ``P(y = 1) = σ(a·x + b)`` by Newton's method on the log-likelihood with a tiny
    ridge on ``a`` and ``b`` (finite under separation; scikit-learn's ``LogisticRegression(C=1e4)``
    gives the same to 1e-4: a test compares them). Written out because importing scikit-learn's
    linear models costs seconds and ``mispair estimate`` answers in under one."""
    design = np.stack([x, np.ones_like(x)], axis=1)
    w = np.zeros(2)
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(design @ w)))
        gradient = design.T @ (p - y) + ridge * w
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + ridge * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return float(w[0]), float(w[1])


@dataclass(frozen=True)
class CutTest:
    """One cut of the fixed sequence: its ``size`` (the top ``k`` of the cut stratum), the
    ``answered`` pairs in it, those judged ``correct`` (unsure counted correct), the proven
    ``upper`` bound of its correct pairs, and whether it ``passed`` (``upper / size ≤ q``)."""

    size: int
    answered: int
    correct: int
    upper: int
    passed: bool

    def to_dict(self) -> dict[str, object]:
        return {
            "size": self.size,
            "answered": self.answered,
            "correct": self.correct,
            "correct_upper_bound": self.upper,
            "passed": self.passed,
        }


@dataclass(frozen=True)
class ProvenCut:
    """The drop proven at false-discovery rate ``fdr`` at risk ``DELTA``: ``dropped [N]`` (bool),
    ``size`` (the top of the cut stratum it keeps of the ranking, 0: none proven), ``tests`` (the
    fixed sequence as run), ``correct_proven`` (the proof's bound of the unjudged correct pairs in
    the drop, at risk ``DELTA``), ``correct_low``/``correct_high`` (their 95% interval, each end
    at :data:`INTERVAL_DELTA`), ``unjudged`` (the dropped pairs nobody judged), ``cut_pairs`` (the
    cut stratum's size), ``answered_in_cut``."""

    fdr: float
    dropped: np.ndarray
    size: int
    tests: tuple[CutTest, ...]
    correct_proven: int
    correct_low: int
    correct_high: int
    unjudged: int
    cut_pairs: int
    answered_in_cut: int

    @property
    def fdr_interval(self) -> tuple[float, float]:
        """The share of correct pairs among the dropped: ``(low, high)``, a 95% interval."""
        count = int(self.dropped.sum())
        if count == 0:
            return (0.0, 0.0)
        return (self.correct_low / count, self.correct_high / count)

    @property
    def fdr_proven(self) -> float:
        """The proven bound of the share of correct pairs among the dropped (at risk ``DELTA``;
        at most ``fdr`` when a cut is proven)."""
        count = int(self.dropped.sum())
        return self.correct_proven / count if count else 0.0


def proven_cut(
    suspicion: np.ndarray, answers: np.ndarray, in_cut: np.ndarray, fdr: float, *, delta: float = DELTA
) -> ProvenCut:
    """The module's proven drop.

    Args:
        suspicion: ``[N]`` every pair's place in the order of suspicion (higher = more suspect).
        answers: ``[N]`` 1 judged mismatched, 0 judged correct, 0.5 unsure, NaN not judged; the
            judged pairs are the first ``n`` of the stratified sample order.
        in_cut: ``[N]`` whether the pair is in the ``cut`` stratum.
        fdr: the level ``q`` in (0, 1).
        delta: the chance the proof is wrong.
    """
    y = np.asarray(answers, dtype=np.float64)
    cut = np.flatnonzero(np.asarray(in_cut, dtype=bool))
    ranked = cut[np.argsort(-np.asarray(suspicion, dtype=np.float64)[cut], kind="stable")]
    judged = ~np.isnan(y[ranked])
    not_mismatched = judged & (y[ranked] < 1)
    tests: list[CutTest] = []
    for size in cut_sizes(len(ranked)):
        m, c = int(judged[:size].sum()), int(not_mismatched[:size].sum())
        upper = correct_upper(size, m, c, delta)
        tests.append(CutTest(size, m, c, upper, upper <= fdr * size))
        if not tests[-1].passed:
            break
    passed = [t for t in tests if t.passed]
    size = passed[-1].size if passed else 0
    dropped = np.zeros(len(y), dtype=bool)
    dropped[ranked[:size][~not_mismatched[:size]]] = True
    dropped |= y == 1
    if passed:
        last = passed[-1]
        proven = last.upper - last.correct
        low = correct_lower(size, last.answered, last.correct, INTERVAL_DELTA) - last.correct
        high = max(correct_upper(size, last.answered, last.correct, INTERVAL_DELTA) - last.correct, proven)
    else:
        proven = low = high = 0
    unjudged = int((dropped & np.isnan(y)).sum())
    return ProvenCut(
        fdr, dropped, size, tuple(tests), proven, low, high, unjudged, len(ranked), int(judged.sum())
    )


def cut_sizes(pairs: int) -> list[int]:
    """The cuts of a cut stratum of ``pairs`` tested, smallest first (:data:`CUT_STEPS`)."""
    return sorted({math.ceil(pairs * j / 8) for j in CUT_STEPS} - {0})


def correct_upper(size: int, answered: int, correct: int, delta: float) -> int:
    """The largest count ``C`` of correct pairs among ``size`` with ``P(X ≤ correct) > delta`` for
    ``X`` hypergeometric (``answered`` drawn from ``size`` holding ``C``): an exact upper
    confidence bound at level ``1 − delta`` (by bisection: the tail falls as ``C`` grows)."""
    low, high = correct, size - (answered - correct)  # the feasible counts
    if hypergeometric_cdf(correct, size, high, answered) > delta:
        return high
    while high - low > 1:
        middle = (low + high) // 2
        if hypergeometric_cdf(correct, size, middle, answered) > delta:
            low = middle
        else:
            high = middle
    return low


def correct_lower(size: int, answered: int, correct: int, delta: float) -> int:
    """The smallest ``C`` with ``P(X ≥ correct) > delta`` (the lower bound beside
    :func:`correct_upper`)."""
    low, high = correct, size - (answered - correct)
    if correct == 0 or 1 - hypergeometric_cdf(correct - 1, size, low, answered) > delta:
        return low
    while high - low > 1:
        middle = (low + high) // 2
        if 1 - hypergeometric_cdf(correct - 1, size, middle, answered) > delta:
            high = middle
        else:
            low = middle
    return high


def hypergeometric_cdf(x: int, population: int, successes: int, draws: int) -> float:
    """``P(X ≤ x)`` for ``X`` the successes among ``draws`` taken without replacement from
    ``population`` holding ``successes``: the sum of ``C(K, i) C(N − K, n − i) / C(N, n)``
    through ``math.lgamma`` (scipy.stats.hypergeom gives the same: a test compares them; written
    out because importing scipy.stats costs ``mispair estimate`` most of its second)."""
    lowest = max(0, draws - (population - successes))
    top = min(x, successes, draws)
    if top < lowest:
        return 0.0
    total = _log_choose(population, draws)
    terms = [
        _log_choose(successes, i) + _log_choose(population - successes, draws - i) - total
        for i in range(lowest, top + 1)
    ]
    return min(1.0, float(sum(math.exp(t) for t in terms)))


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)

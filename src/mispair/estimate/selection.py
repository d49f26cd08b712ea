"""The drop with an error a person can prove: conformal selection of the mismatched pairs against
the pairs a person judged correct (Jin & Candès, *Selection by prediction with conformal
p-values*, JMLR 2023), and each pair's probability recalibrated on the answers.

The judged pairs are a uniform random sample, so the pairs judged correct are exchangeable with
the unjudged correct pairs. For an unjudged pair ``j`` with mismatch probability ``f_j``, the
conformal p-value (their clipped score, deterministic form)

    p_j = (1 + #{judged i : i correct, f_i ≥ f_j}) / (n + 1),      n = every judged pair,

is super-uniform when ``j`` is correct; Benjamini–Hochberg at level ``q`` over the unjudged
pairs' ``p_j`` then selects a set whose expected share of correct pairs is at most ``q``
(their Theorem 2.3), whatever the scores' quality. The pairs judged mismatched are suspected
too (known); unsure answers count as correct in the p-values (conservative) and are not
selected.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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

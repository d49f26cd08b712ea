"""How well a division finds the truly mismatched pairs: NCR's and L2RM's detection scores of a
clean split, and the audit's of a ranking (its AUC and average precision, and the curves of
:func:`detection_curves`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.metrics import (
    average_precision_score,
    precision_recall_curve,
    precision_recall_fscore_support,
    roc_auc_score,
    roc_curve,
)


def detection_metrics(
    clean_prob: np.ndarray, is_noisy: np.ndarray, threshold: float = 0.5
) -> dict[str, float]:
    """Score clean probabilities ``[N]`` against the true noise ``[N]`` (True = mismatched pair).

    Clean pairs are the positive class throughout:

    * ``auc``: ROC-AUC of ``clean_prob`` for telling clean pairs from mismatched ones — the
      chance that a random clean pair scores above a random mismatched one (ties count ½);
      NaN when only one class is present.
    * ``precision``, ``recall``, ``f1`` of the clean split ``clean_prob > threshold`` (as
      :meth:`Division.split`); 0 where undefined (nothing predicted clean, no clean pair).
    * ``clean_fraction``: the fraction of pairs predicted clean.

    Raises:
        ValueError: the shapes differ, are not 1-D or are empty, or ``clean_prob`` is not finite.
    """
    clean_prob = np.asarray(clean_prob, dtype=np.float64)
    is_clean = ~np.asarray(is_noisy, dtype=bool)
    if clean_prob.ndim != 1 or clean_prob.shape != is_clean.shape or not len(clean_prob):
        raise ValueError(
            f"clean_prob {clean_prob.shape} and is_noisy {is_clean.shape}: "
            "need two non-empty 1-D arrays of the same length"
        )
    if not np.isfinite(clean_prob).all():
        raise ValueError("clean_prob has NaN or infinite entries")
    predicted = clean_prob > threshold
    both = 0 < is_clean.sum() < len(is_clean)
    auc = roc_auc_score(is_clean, clean_prob) if both else np.nan
    precision, recall, f1, _ = precision_recall_fscore_support(
        is_clean, predicted, average="binary", pos_label=True, zero_division=0.0
    )
    return {
        "auc": float(auc),
        "precision": float(precision),
        "recall": float(recall),
        "f1": float(f1),
        "clean_fraction": float(predicted.mean()),
    }


def ranking_detection(score: np.ndarray, truly_mismatched: np.ndarray) -> dict[str, float]:
    """AUC and average precision of ``score`` (low = suspect) against the known mismatches."""
    suspicion = -np.asarray(score, dtype=np.float64)
    return {
        "auc": float(roc_auc_score(truly_mismatched, suspicion)),
        "average_precision": float(average_precision_score(truly_mismatched, suspicion)),
    }


@dataclass
class DetectionCurves:
    """How well the ranking finds the known mismatched pairs (positives: mismatched).

    ``auc``: ROC-AUC of the suspicion; ``average_precision``; ``precision``/``recall`` of the
    suspected set (mismatch probability ≥ the threshold); ``kept_precision``: the share of the pairs
    left unsuspected (what a user keeps) that are truly matched, ``kept_recall``: the share of the
    truly matched pairs left unsuspected; ``roc`` (fpr, tpr) and ``pr`` (recall, precision)
    curves, thinned to at most 200 points for the report.
    """

    auc: float
    average_precision: float
    precision: float
    recall: float
    kept_precision: float
    kept_recall: float
    suspected: int
    mismatched: int
    pairs: int
    roc: tuple[list[float], list[float]]
    pr: tuple[list[float], list[float]]

    def summary(self) -> dict[str, Any]:
        return {
            "auc": self.auc,
            "average_precision": self.average_precision,
            "precision": self.precision,
            "recall": self.recall,
            "kept_precision": self.kept_precision,
            "kept_recall": self.kept_recall,
            "suspected": self.suspected,
            "mismatched": self.mismatched,
            "pairs": self.pairs,
        }


def detection_curves(
    score: np.ndarray,
    clean_prob: np.ndarray,
    is_noisy: np.ndarray,
    *,
    threshold: float = 0.5,
    suspected: np.ndarray | None = None,
) -> DetectionCurves:
    """Score the ranking (low ``score`` = suspect) and the suspected set (``suspected [n_pairs]``
    bool, else the mismatch probability ``1 − clean_prob`` at least ``threshold``) against
    ``is_noisy [n_pairs]`` (True = truly mismatched; both classes must be present)."""
    suspicion = -np.asarray(score, dtype=np.float64)
    fpr, tpr, _ = roc_curve(is_noisy, suspicion)
    precision, recall, _ = precision_recall_curve(is_noisy, suspicion)
    suspected = 1.0 - clean_prob >= threshold if suspected is None else np.asarray(suspected, dtype=bool)
    hits = int((suspected & is_noisy).sum())
    kept_matched = int((~suspected & ~is_noisy).sum())
    ranking = ranking_detection(score, is_noisy)
    return DetectionCurves(
        auc=ranking["auc"],
        average_precision=ranking["average_precision"],
        precision=hits / max(int(suspected.sum()), 1),
        recall=hits / max(int(is_noisy.sum()), 1),
        kept_precision=kept_matched / max(int((~suspected).sum()), 1),
        kept_recall=kept_matched / max(int((~is_noisy).sum()), 1),
        suspected=int(suspected.sum()),
        mismatched=int(is_noisy.sum()),
        pairs=len(is_noisy),
        roc=_thin(fpr, tpr),
        pr=_thin(recall, precision),
    )


def _thin(x: np.ndarray, y: np.ndarray, points: int = 200) -> tuple[list[float], list[float]]:
    keep = np.unique(np.linspace(0, len(x) - 1, min(points, len(x))).round().astype(int))
    return x[keep].round(5).tolist(), y[keep].round(5).tolist()

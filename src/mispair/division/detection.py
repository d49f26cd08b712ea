"""How well a division finds the truly mismatched pairs: NCR's and L2RM's detection scores."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import precision_recall_fscore_support, roc_auc_score


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

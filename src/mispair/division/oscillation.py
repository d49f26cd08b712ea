"""PC²'s prediction oscillation: how much a pair's pseudo-prediction moved since the last epoch."""

from __future__ import annotations

import numpy as np
from scipy import special


def oscillation_scores(prev_probs: np.ndarray, probs: np.ndarray, *, eps: float = 1e-12) -> np.ndarray:
    """Per-sample KL divergence between the pseudo-predictions of consecutive epochs, PC² Eq. 7.

    ``o_i^(e) = D_KL(p_i^(e) ‖ p_i^(e−1)) = Σ_k p_ik^(e) log(p_ik^(e) / p_ik^(e−1))`` — the
    current prediction against the previous one, as PC²'s reference computes it. A high score
    means an oscillating prediction, i.e. a weak image–caption correspondence (§4.4); the scores
    go through the same mixture division as losses (min-max normalise, then ``fit_*``).

    Zeros are safe: ``0 · log 0 = 0`` for the current prediction, and the previous one is clamped
    to ``eps`` so that a class it ruled out gives a large finite score, not infinity.

    Args:
        prev_probs: ``[N, K]`` probabilities ``p^(e−1)`` of the previous epoch (rows sum to 1).
        probs: ``[N, K]`` probabilities ``p^(e)`` of this epoch.
        eps: floor of ``prev_probs`` inside the logarithm.

    Returns:
        ``[N]`` float64 scores, ≥ 0 up to rounding.

    Raises:
        ValueError: the shapes differ or are not 2-D.
    """
    prev_probs = np.asarray(prev_probs, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or probs.shape != prev_probs.shape:
        raise ValueError(
            f"prev_probs {prev_probs.shape} and probs {probs.shape}: need two [N, K] arrays of the same shape"
        )
    return (special.xlogy(probs, probs) - special.xlogy(probs, np.maximum(prev_probs, eps))).sum(1)

"""Shared data for the division tests."""

import numpy as np


def two_modes(n: int = 1000, seed: int = 0) -> np.ndarray:
    """``[2n]`` min-max-normalised losses: ``n`` clean ones near 0.2, then ``n`` noisy near 0.7."""
    rng = np.random.default_rng(seed)
    losses = np.concatenate([rng.normal(0.2, 0.05, n), rng.normal(0.7, 0.1, n)])
    return (losses - losses.min()) / (losses.max() - losses.min())

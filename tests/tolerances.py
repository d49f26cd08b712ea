"""Tolerances derived from floating-point error bounds, not tuned to one CPU.

A float32 sum of ``n`` terms computed in any order differs from the exact sum by at most
``γ_n · Σ|terms|`` with ``γ_n = n·u / (1 − n·u)``, ``u = 2⁻²⁴`` (Higham, *Accuracy and Stability
of Numerical Algorithms*, §4.2). Two float32 computations of the same quantity that sum in
different orders (a stacked batch against one matrix at a time, another BLAS kernel) therefore
agree within ``2 γ_n`` times the magnitude of what was summed; the tests bound that magnitude by
the largest entry compared (all terms of a gradient share its scale) times ``n``.
"""

from __future__ import annotations

import torch

FLOAT32_UNIT_ROUNDOFF = 2.0**-24


def gamma(n: int, unit: float = FLOAT32_UNIT_ROUNDOFF) -> float:
    """Higham's ``γ_n``: the relative error bound of a sum (or dot product) of ``n`` terms."""
    if n * unit >= 1:
        raise ValueError(f"γ_n is undefined for n·u ≥ 1 (n = {n})")
    return n * unit / (1 - n * unit)


def float32_close(actual: torch.Tensor, expected: torch.Tensor, terms: int) -> bool:
    """``actual`` equals ``expected`` up to the rounding of two float32 evaluations, each a sum of
    at most ``terms`` terms no larger than ``expected``'s largest entry (the scale of the whole
    tensor, so near-zero entries of a large gradient get the tolerance their sums earned)."""
    scale = float(expected.abs().max()) if expected.numel() else 0.0
    bound = 2 * gamma(terms) * terms * scale
    return bool((actual - expected).abs().max() <= bound) if expected.numel() else True

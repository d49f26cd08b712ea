"""Sample division: two-component mixtures over per-sample losses, the clean/noisy split they give,
co-divide, PC²'s prediction oscillation, and scoring a division against the true noise.

A bottom layer: it needs numpy, scipy and scikit-learn only. The per-sample losses it divides are
computed with the recipes' models one layer up (:mod:`mispair.methods.scoring`).
"""

from mispair.division.bmm import fit_bmm
from mispair.division.detection import detection_metrics
from mispair.division.gmm import fit_gmm, fit_vbgmm
from mispair.division.mixtures import (
    DegenerateDivisionWarning,
    Division,
    co_divide,
    divide,
    min_max_normalize,
)
from mispair.division.oscillation import oscillation_scores

__all__ = [
    "DegenerateDivisionWarning",
    "Division",
    "co_divide",
    "detection_metrics",
    "divide",
    "fit_bmm",
    "fit_gmm",
    "fit_vbgmm",
    "min_max_normalize",
    "oscillation_scores",
]

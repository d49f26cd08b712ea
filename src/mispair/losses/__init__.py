"""Per-sample losses: each returns one term per pair; the recipe weights and reduces."""

from mispair.losses.asymmetric import asymmetric_loss, soft_boundary
from mispair.losses.complementary import (
    complementary_loss,
    matching_probabilities,
    negative_learning_loss,
    rcl_ablation_loss,
)
from mispair.losses.info_nce import info_nce_loss, reverse_cross_entropy
from mispair.losses.reduction import Reduction, reduce_batch
from mispair.losses.triplet import hinge_costs, mean_hinge_loss, triplet_loss

__all__ = [
    "Reduction",
    "asymmetric_loss",
    "complementary_loss",
    "hinge_costs",
    "info_nce_loss",
    "matching_probabilities",
    "mean_hinge_loss",
    "negative_learning_loss",
    "rcl_ablation_loss",
    "reduce_batch",
    "reverse_cross_entropy",
    "soft_boundary",
    "triplet_loss",
]

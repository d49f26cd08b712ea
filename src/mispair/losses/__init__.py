"""Per-sample losses: each returns one term per pair; the recipe weights and reduces."""

from mispair.losses.asymmetric import asymmetric_loss, soft_boundary
from mispair.losses.complementary import (
    complementary_loss,
    matching_probabilities,
    negative_learning_loss,
    rcl_ablation_loss,
)
from mispair.losses.info_nce import info_nce_loss, reverse_cross_entropy
from mispair.losses.pseudo_classification import (
    balance_loss,
    pseudo_classification_loss,
    pseudo_pair_loss,
)
from mispair.losses.reduction import Reduction, reduce_batch
from mispair.losses.soft_pair import PairLoss, soft_pair_loss
from mispair.losses.soft_targets import correspondence_prediction, rectified_target, soft_margin
from mispair.losses.triplet import hinge_costs, mean_hinge_loss, triplet_loss

__all__ = [
    "PairLoss",
    "Reduction",
    "asymmetric_loss",
    "balance_loss",
    "complementary_loss",
    "correspondence_prediction",
    "hinge_costs",
    "info_nce_loss",
    "matching_probabilities",
    "mean_hinge_loss",
    "negative_learning_loss",
    "pseudo_classification_loss",
    "pseudo_pair_loss",
    "rcl_ablation_loss",
    "rectified_target",
    "reduce_batch",
    "reverse_cross_entropy",
    "soft_boundary",
    "soft_margin",
    "soft_pair_loss",
    "triplet_loss",
]

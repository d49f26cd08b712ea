"""What a division fits: per-sample losses of every training pair under a recipe's models, or the
run's memorisation-free pair scores, and the clean probabilities a mixture gives them.

In a multi-process run (:mod:`mispair.distributed`) the losses are scored by every rank on its
share of the batches and summed, and each mixture is fitted once, on rank 0, and broadcast: every
rank trains on the same division, and the recipes call no collective themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from mispair.data.batching import TrainingPairs
from mispair.distributed import from_main, sum_over
from mispair.division import Division, min_max_normalize
from mispair.encoding import evaluating
from mispair.losses.triplet import mean_hinge_loss
from mispair.methods.base import RecipeContext
from mispair.nn.model import RetrievalModel
from mispair.progress import progress_bar


@torch.no_grad()
def per_sample_losses(
    models: Sequence[RetrievalModel],
    train: TrainingPairs,
    *,
    batch_size: int,
    seed: int,
    device: torch.device | str = "cpu",
    loss_fn: Callable[[Tensor], Tensor] = mean_hinge_loss,
    progress: bool = False,
) -> np.ndarray:
    """``[n_models, n_pairs]`` loss of every training pair under each model, in eval mode.

    The pairs are cut into shuffled batches (``seed``), the same for every model, so that each
    pair is scored against a random set of the training pairs as negatives (NCR shuffles too; in
    order, the five captions of an image would be each other's negatives). With a sharded
    ``train``, each rank scores whole batches (every ``world``-th one) and the losses are summed
    over the ranks: every rank gets the losses a single process computes.
    """
    losses = np.zeros((len(models), len(train)), dtype=np.float64)
    shard = train.shard
    mine = train.batch_indices(batch_size, seed=seed)[shard.rank :: shard.world]
    with evaluating(*models):
        for indices in progress_bar(mine, desc="division", disable=not progress, leave=False):
            batch = train.batch(indices).to(device)
            index = batch.index.cpu().numpy()
            for k, model in enumerate(models):
                sims = model(batch.images, batch.tokens, batch.lengths)
                losses[k, index] = loss_fn(sims).double().cpu().numpy()
    return sum_over(shard, losses)


def clean_probability(
    losses: np.ndarray, fit: Callable[[np.ndarray], Division], context: RecipeContext
) -> np.ndarray:
    """``[n_rows, n_pairs]`` the clean probability of every pair under the two-component mixture
    ``fit`` (``fit_gmm``, ``fit_bmm``, ...) of each row of ``losses [n_rows, n_pairs]``
    (min–max normalised; low = clean). Fitted once, on rank 0, in a multi-process run."""

    def fit_rows() -> np.ndarray:
        return np.stack([fit(min_max_normalize(row)).clean_prob for row in losses])

    return from_main(context.shard, fit_rows)


def division_losses(
    models: Sequence[RetrievalModel],
    context: RecipeContext,
    *,
    batch_size: int,
    seed: int,
    loss_fn: Callable[[Tensor], Tensor] = mean_hinge_loss,
) -> np.ndarray:
    """``[n_models, n_pairs]`` the losses a division fits its mixture to (low = clean): the
    negated pair scores of the run (``context.pair_scores``, out-of-fold or early-epoch; the same
    for every model) when it has them, else :func:`per_sample_losses` of ``models`` in-sample."""
    if context.pair_scores is not None:
        return np.tile(-np.asarray(context.pair_scores, dtype=np.float64), (len(models), 1))
    return per_sample_losses(
        models, context.train, batch_size=batch_size, seed=seed, device=context.device, loss_fn=loss_fn
    )

"""The vse recipe: its losses and reductions on a batch, recomputed by hand."""

import pytest
import torch

from mispair.losses import info_nce_loss, triplet_loss


@pytest.mark.parametrize("loss", ["triplet", "infonce"])
def test_reduction_sums_or_averages_the_per_sample_loss(make_recipe, loss):
    batch = next(iter(make_recipe("vse").context.train.batches(16, seed=0)))
    values = {}
    for reduction in ("mean", "sum"):
        recipe = make_recipe("vse", loss=loss, reduction=reduction)
        values[reduction] = recipe.train_step(batch, epoch=0).terms[loss]
        sims = recipe.models[0](batch.images, batch.tokens, batch.lengths)
        if loss == "infonce":
            per_sample = info_nce_loss(sims, 0.05)
        else:
            per_sample = triplet_loss(sims, 0.2, negatives="hardest")
        expected = per_sample.sum() if reduction == "sum" else per_sample.mean()
        assert torch.allclose(values[reduction], expected)
    assert torch.allclose(values["sum"], values["mean"] * len(batch))


def test_hardest_after_switches_from_sum_to_max(make_recipe):
    recipe = make_recipe("vse", hardest_after=2)
    batch = next(iter(recipe.context.train.batches(16, seed=0)))
    sims = recipe.models[0](batch.images, batch.tokens, batch.lengths)
    early, late = (recipe.train_step(batch, epoch=e).terms["triplet"] for e in (1, 2))
    assert torch.allclose(early, triplet_loss(sims, 0.2).mean())
    assert torch.allclose(late, triplet_loss(sims, 0.2, negatives="hardest").mean())

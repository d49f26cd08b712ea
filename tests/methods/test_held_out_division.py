"""Every division recipe fits the run's held-out pair scores, when it has them, instead of its own
in-sample losses."""

import numpy as np

from mispair.methods.scoring import division_losses


def test_every_division_recipe_fits_the_held_out_scores_when_the_run_has_them(make_recipe):
    for name in ("ncr", "asl", "pc2", "l2rm"):
        recipe = make_recipe(name, warmup_epochs=0)
        n = len(recipe.context.train)
        recipe.context.pair_scores = np.linspace(1, -1, n)
        losses = division_losses(recipe.models, recipe.context, batch_size=16, seed=0)
        assert losses.shape == (len(recipe.models), n)
        assert np.array_equal(losses[0], -recipe.context.pair_scores)
        recipe.begin_epoch(0)
        prob = np.asarray(recipe.clean_prob).reshape(-1, n)[0]
        assert prob[: n // 4].mean() > prob[-n // 4 :].mean()  # high score → clean

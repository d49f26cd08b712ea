"""Pair scores the scoring model has not memorised: out-of-fold similarities.

A division that scores the pairs its own model trained on sees the mismatched pairs fitted
within a few epochs on a small collection (in-sample detection AUC falls towards 0.5). Here the
training pairs are split into ``k`` folds by their paired image; each fold is scored by a model
trained on the other ``k − 1`` folds only, so neither the caption nor the image of a scored pair
was ever trained on by the model that scores it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch

from mispair.config import RunConfig
from mispair.data.batching import TrainingPairs
from mispair.engine.assembly import RunData, build_models
from mispair.engine.export import pair_similarities
from mispair.engine.trainer import Trainer
from mispair.methods.base import RecipeContext, build_options, get_recipe
from mispair.nn.model import RetrievalModel


@dataclass(frozen=True)
class OutOfFoldScores:
    """``score [n_pairs]``: each training pair's similarity under the model of its fold (higher =
    more likely matched); ``fold [n_pairs]``: the fold that held the pair out."""

    score: np.ndarray
    fold: np.ndarray


def image_folds(image_of_caption: np.ndarray, n_images: int, folds: int, seed: int) -> np.ndarray:
    """``[n_pairs]`` fold of every pair: the fold of its paired image, the images dealt at random
    (``seed``) into ``folds`` folds of near-equal size."""
    if folds < 2:
        raise ValueError(f"out-of-fold scoring needs at least 2 folds, got {folds}")
    of_image = np.empty(n_images, dtype=np.int64)
    of_image[np.random.default_rng(seed).permutation(n_images)] = np.arange(n_images) % folds
    return of_image[np.asarray(image_of_caption, dtype=np.int64)]


def out_of_fold_scores(
    config: RunConfig,
    data: RunData,
    train: TrainingPairs,
    *,
    folds: int = 5,
    device: torch.device | str = "cpu",
    train_fold: Callable[[Trainer], None] | None = None,
) -> OutOfFoldScores:
    """Score every pair of ``train`` with a model that never saw it (module docstring).

    Each fold's model is built, trained and scored as ``config`` says (recipe, model, train
    settings and epochs; a plain ``vse`` scorer is the usual choice) on the pairs of the other
    folds, with the pairing of ``train`` (noisy or not).

    Args:
        config: the scoring run (its recipe must train a single model).
        data: the run's data (for the tokenizer size and features).
        train: the training pairs to score, as paired.
        folds: ``k``.
        device: where the fold models train.
        train_fold: trains one fold's :class:`Trainer` (default: ``config.train.epochs``
            epochs of :meth:`Trainer.train_epoch`); a hook for tests and progress.
    """
    fold = image_folds(train.image_of_caption, data.train.n_images, folds, config.train.seed)
    score = np.zeros(len(train), dtype=np.float32)
    device = torch.device(device)
    for k in range(folds):
        held_out = np.flatnonzero(fold == k)
        fold_config = replace(config, train=replace(config.train, seed=config.train.seed * folds + k))
        model = train_scorer(fold_config, data, train.subset(np.flatnonzero(fold != k)), device,
                             train_fold)  # fmt: skip
        scored = pair_similarities([model], train.subset(held_out), config.train.eval_batch_size, device)
        score[held_out] = scored
    return OutOfFoldScores(score, fold)


def train_scorer(
    config: RunConfig,
    data: RunData,
    pairs: TrainingPairs,
    device: torch.device,
    train_fold: Callable[[Trainer], None] | None = None,
) -> RetrievalModel:
    """One scoring model of ``config`` trained on ``pairs`` in memory (no evaluation, no files),
    returned in eval mode; ``train_fold`` as in :func:`out_of_fold_scores`."""
    recipe_cls = get_recipe(config.recipe)
    if recipe_cls.n_models != 1:
        raise ValueError(f"out-of-fold scoring trains a single model, recipe {config.recipe!r} has "
                         f"{recipe_cls.n_models}")  # fmt: skip
    context = RecipeContext(pairs, config.train.batch_size, config.train.epochs, device,
                            config.train.seed, config.train.eval_batch_size)  # fmt: skip
    models = build_models(config, 1, data, device)
    recipe = recipe_cls(models, build_options(recipe_cls, config.method), context)
    trainer = Trainer(config, recipe, progress=False)
    if train_fold is None:
        for epoch in range(config.train.epochs):
            trainer.train_epoch(epoch)
    else:
        train_fold(trainer)
    return models[0].eval()

"""Pair scores the scoring model has not memorised: out-of-fold and early-epoch similarities.

A division that scores the pairs its own model trained on sees the mismatched pairs fitted
within a few epochs on a small collection (in-sample detection AUC falls towards 0.5). Here:

- **out of fold**: the training pairs are split into ``k`` folds by their paired image; each fold
  is scored by a model trained on the other ``k − 1`` folds only, so neither the caption nor the
  image of a scored pair was ever trained on by the model that scores it;
- **early**: one model trained on all pairs, each pair's similarity averaged over its first
  epochs, before the mismatched pairs are fitted (one training instead of ``k``: for large data).

:func:`division_scores` computes what a run's ``division`` section asks for, once per run (kept
in the run's folder as ``pair_scores.npz``); the division recipes fit their mixtures to these
scores instead of their own losses, and ``--export-pairs`` writes them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from mispair.atomic import atomic_write
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
    progress: bool = False,
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
            epochs of :meth:`Trainer.train_epoch`); a hook for tests.
        progress: a progress bar over the folds.
    """
    fold = image_folds(train.image_of_caption, data.train.n_images, folds, config.train.seed)
    score = np.zeros(len(train), dtype=np.float32)
    device = torch.device(device)
    for k in tqdm(range(folds), desc="out-of-fold scorers", disable=not progress, leave=False):
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


def early_epoch_scores(config: RunConfig, data: RunData, train: TrainingPairs, *,
                       device: torch.device | str = "cpu", progress: bool = False) -> np.ndarray:  # fmt: skip
    """``[n_pairs]``: each pair's similarity under one scorer of ``config`` trained on all pairs of
    ``train``, averaged over the scorer's ``config.train.epochs`` epochs (scored after each)."""
    device = torch.device(device)
    total = np.zeros(len(train), dtype=np.float64)

    def score_each_epoch(trainer: Trainer) -> None:
        for epoch in tqdm(range(config.train.epochs), desc="early scorer", disable=not progress, leave=False):
            trainer.train_epoch(epoch)
            model = trainer.recipe.models[0]
            total[:] += pair_similarities([model.eval()], train, config.train.eval_batch_size, device)
            model.train()

    train_scorer(config, data, train, device, score_each_epoch)
    return (total / config.train.epochs).astype(np.float32)


def scorer_config(config: RunConfig) -> RunConfig:
    """The scoring run of ``config``'s division: its data, model and train settings with the
    ``vse`` recipe, the ``division.scorer`` options and ``division.epochs`` epochs at a constant
    learning rate."""
    division = config.division
    train = replace(config.train, epochs=division.epochs, lr_decay_epochs=[])
    return replace(config, recipe="vse", method=dict(division.scorer), train=train)


def division_scores(config: RunConfig, data: RunData, train: TrainingPairs, device: torch.device, *,
                    cache: Path | None = None, progress: bool = False) -> np.ndarray | None:  # fmt: skip
    """``[n_pairs]`` the scores ``config.division`` asks for (higher = more likely matched), or
    None for ``in_sample``. With ``cache`` (a run's ``pair_scores.npz``), scores computed for the
    same data, model, scorer and seed are read back instead of trained again."""
    kind = config.division.scores
    if kind == "in_sample":
        return None
    scoring = scorer_config(config)
    key = _scores_key(scoring, train)
    if cache is not None and cache.is_file():
        with np.load(cache) as saved:
            if str(saved["key"]) == key:
                return saved["score"]
    if kind == "out_of_fold":
        score = out_of_fold_scores(scoring, data, train, folds=config.division.folds, device=device,
                                   progress=progress).score  # fmt: skip
    else:
        score = early_epoch_scores(scoring, data, train, device=device, progress=progress)
    if cache is not None:
        atomic_write(cache, lambda handle: np.savez(handle, score=score, key=np.array(key)))
    return score


def _scores_key(scoring: RunConfig, train: TrainingPairs) -> str:
    """What the scores depend on: the scoring run's settings and the pairing scored."""
    settings = {k: v for k, v in asdict(scoring).items() if k not in ("name", "output")}
    digest = hashlib.blake2b(json.dumps(settings, sort_keys=True, default=str).encode(), digest_size=16)
    digest.update(np.ascontiguousarray(train.image_of_caption).tobytes())
    return digest.hexdigest()

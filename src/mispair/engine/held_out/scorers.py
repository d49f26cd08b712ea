"""Training held-out scorers: one :class:`ScorerRun` per held-out fold, trained side by side
(:mod:`mispair.engine.held_out.side_by_side`) where the model allows it, else one by one through
the :class:`~mispair.engine.trainer.Trainer`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mispair.config import RunConfig
from mispair.data.batching import TrainingPairs
from mispair.encoding import frozen
from mispair.engine.assembly import RunData, build_models
from mispair.engine.held_out.side_by_side import (
    LinearInputs,
    ScorerJob,
    side_by_side_spec,
    train_side_by_side,
)
from mispair.engine.trainer import Trainer
from mispair.methods.base import RecipeContext, build_options, get_recipe
from mispair.nn.linear_backbone import LINEAR_WEIGHTS
from mispair.nn.model import RetrievalModel


@dataclass(frozen=True)
class ScorerRun:
    """One held-out scorer to train: its ``job`` (``repeat × folds + fold``), its run ``config``
    (its own seed), the indices ``pairs`` of the training pairs it trains on and the weights it
    starts from (``start``; None: a fresh initialisation)."""

    job: int
    config: RunConfig
    pairs: np.ndarray
    start: dict[str, Tensor] | None = None

    @property
    def seed(self) -> int:
        """The scorer's own seed."""
        return self.config.train.seed


def trained_scorers(
    runs: list[ScorerRun],
    data: RunData,
    train: TrainingPairs,
    device: torch.device,
    train_fold: Callable[[Trainer], None] | None = None,
) -> Iterator[tuple[ScorerRun, RetrievalModel]]:
    """``(run, its trained model, frozen)`` for each of ``runs``, in order: all of them trained
    side by side (:mod:`mispair.engine.held_out.side_by_side`) when their model allows it, else one by one
    (:func:`train_scorer`; always with a ``train_fold`` hook)."""
    if not runs:
        return
    first = _initial_scorer(runs[0], data, device)
    spec = None if train_fold is not None else side_by_side_spec(runs[0].config, first)
    if spec is None:
        del first  # one model at a time, as each is trained
        for run in runs:
            model = train_scorer(
                run.config, data, train.subset(run.pairs), device, train_fold, start=run.start
            )
            yield run, model
        return
    models = [first, *(_initial_scorer(run, data, device) for run in runs[1:])]
    inputs = LinearInputs.of(first, train, device)
    jobs = [
        ScorerJob(run.pairs, run.seed, {n: model.state_dict()[n] for n in LINEAR_WEIGHTS})
        for run, model in zip(runs, models)
    ]
    for run, model, weights in zip(runs, models, train_side_by_side(jobs, inputs, spec, device)):
        model.load_state_dict({**model.state_dict(), **weights})
        yield run, frozen(model)


def _initial_scorer(run: ScorerRun, data: RunData, device: torch.device) -> RetrievalModel:
    """The model ``run`` starts from: built as :func:`train_scorer` builds it, with its start."""
    model = build_models(run.config, 1, data, device)[0]
    if run.start is not None:
        model.load_state_dict(run.start)
    return model


def train_scorer(
    config: RunConfig,
    data: RunData,
    pairs: TrainingPairs,
    device: torch.device,
    train_fold: Callable[[Trainer], None] | None = None,
    *,
    start: dict[str, Tensor] | None = None,
    after_epoch: Callable[[Trainer], None] | None = None,
) -> RetrievalModel:
    """One scoring model of ``config`` trained on ``pairs`` in memory (no evaluation, no files),
    returned frozen (eval mode, no gradients); ``train_fold`` as in
    :class:`~mispair.engine.held_out.plan.Runtime`; ``start``: the weights it starts from (default: a
    fresh initialisation); ``after_epoch``: called with the trainer after each epoch (the early
    scorer scores the pairs there)."""
    recipe_cls = get_recipe(config.recipe)
    if recipe_cls.n_models != 1:
        raise ValueError(
            f"out-of-fold scoring trains a single model, recipe {config.recipe!r} has {recipe_cls.n_models}"
        )
    context = RecipeContext(
        pairs,
        config.train.batch_size,
        config.train.epochs,
        device,
        config.train.seed,
        config.train.eval_batch_size,
    )
    models = build_models(config, 1, data, device)
    if start is not None:
        models[0].load_state_dict(start)
    recipe = recipe_cls(models, build_options(recipe_cls, config.method), context)
    trainer = Trainer(config, recipe, progress=False)
    if train_fold is None:
        for epoch in range(config.train.epochs):
            trainer.train_epoch(epoch)
            if after_epoch is not None:
                after_epoch(trainer)
    else:
        train_fold(trainer)
    return frozen(models[0])

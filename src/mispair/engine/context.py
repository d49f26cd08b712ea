"""The recipe's view of a run (:class:`~mispair.methods.base.RecipeContext`): its training pairs
(this process's share), schedule, device and seed, the noise record, and the held-out pair scores
of its division (computed, or read from the run folder's cache)."""

from __future__ import annotations

from pathlib import Path

import torch

from mispair.config import RunConfig
from mispair.data.batching import TrainingPairs
from mispair.data.noise import NoiseRecord
from mispair.distributed import Shard
from mispair.division.scores import PAIR_SCORES_FILE, DivisionScores
from mispair.engine.assembly import RunData
from mispair.engine.held_out import Runtime, division_scores
from mispair.methods.base import RecipeContext


def recipe_context(
    config: RunConfig,
    data: RunData,
    train: TrainingPairs,
    noise: NoiseRecord | None,
    others: TrainingPairs | None,
    device: torch.device,
    out_dir: Path,
    progress: bool,
    shard: Shard,
) -> tuple[RecipeContext, DivisionScores | None]:
    """The recipe's context and the run's held-out scores (None for an in-sample division)."""
    cache = out_dir / PAIR_SCORES_FILE
    runtime = Runtime(device, shard, progress)
    scores = division_scores(config, data, train, runtime, cache=cache, others=others)
    context = RecipeContext(
        train=train.sharded(shard),
        batch_size=config.train.batch_size,
        epochs=config.train.epochs,
        device=device,
        seed=config.train.seed,
        eval_batch_size=config.train.eval_batch_size,
        noise=noise,
        pair_scores=None if scores is None else scores.train,
        answers=None if scores is None else scores.judged,
        p_threshold=config.division.p_threshold,
    )
    return context, scores

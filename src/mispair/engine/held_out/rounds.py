"""The scorings made of several trainings: refinement rounds of out-of-fold scorers (each later
round trained on the previous round's clean split), and the early-epoch scorer (one scorer trained
on every pair, each pair's similarity averaged over its first epochs)."""

from __future__ import annotations

from functools import partial

import numpy as np
from torch import Tensor

from mispair.data.batching import TrainingPairs
from mispair.distributed import from_main
from mispair.division.scores import TRAINING_MIXTURE, clean_split
from mispair.encoding import evaluating, pair_similarities
from mispair.engine.assembly import RunData
from mispair.engine.held_out.nested import nested_trust
from mispair.engine.held_out.out_of_fold import OutOfFoldScores, scored_round
from mispair.engine.held_out.plan import ON_CPU, HeldOutPlan, HeldOutScoring, RoundStart, Runtime
from mispair.engine.held_out.sampling import deal_pairs
from mispair.engine.held_out.scorers import train_scorer
from mispair.engine.trainer import Trainer
from mispair.progress import progress_bar


def refined_out_of_fold_scores(
    scoring: HeldOutScoring,
    data: RunData,
    train: TrainingPairs,
    *,
    others: TrainingPairs | None = None,
    runtime: Runtime = ON_CPU,
) -> OutOfFoldScores:
    """``[n_pairs]`` out-of-fold scores after ``plan.rounds`` rounds: round 1 trains the fold models
    on all pairs of the other folds; each later round trains them on the pairs of the other folds
    that the previous round's scores put in the clean split (the held-out mixture,
    :func:`~mispair.division.scores.clean_split`, clean probability above ``plan.p_threshold``),
    so the mismatched pairs no longer teach the scorers (the reference for this is the
    clean-trained detector: scorers trained on the truly clean pairs). The pairs are dealt once,
    alike for every round; the folds are dealt over ``runtime.shard``'s ranks and each round's
    split is fitted on rank 0. ``others``: as in
    :func:`~mispair.engine.held_out.out_of_fold.out_of_fold_scores`, every round (the last round's
    scores are returned). With ``plan.refine_epochs``, each later round's scorer of a fold starts
    from the previous round's scorer of that fold (trained on the other folds only: the fold stays
    unseen) and trains ``refine_epochs`` epochs on the new clean split instead of the scorer's
    epochs from scratch. With ``plan.nested_trust`` the rounds before the last train the scorers of
    :mod:`~mispair.engine.held_out.nested` instead, so that no scorer trains on pairs trusted by a
    model that saw a fold it holds out."""
    plan = scoring.plan
    trusted: np.ndarray | None = None
    start: dict[int, dict[str, Tensor]] | None = None
    dealt = deal_pairs(scoring, train, others, data.train.n_images)
    if plan.nested_trust and plan.rounds > 1:
        last = RoundStart(plan.rounds - 1, nested_trust(scoring, data, train, dealt, runtime))
        return scored_round(scoring, data, train, dealt, runtime, last)
    warm = plan.refine_epochs is not None and plan.rounds > 1
    for round_index in range(plan.rounds):
        keep = warm and round_index < plan.rounds - 1
        epochs = None if start is None else plan.refine_epochs  # a warm-started round: its own schedule
        round_start = RoundStart(round_index, trusted, start, keep, epochs)
        scores = scored_round(scoring, data, train, dealt, runtime, round_start)
        start, trusted = scores.scorers, from_main(runtime.shard, partial(_clean, scores.score, plan))
    return scores


def _clean(score: np.ndarray, plan: HeldOutPlan) -> np.ndarray:
    """The next round's trusted pairs: the clean split of the held-out mixture."""
    return clean_split(score, plan.p_threshold, TRAINING_MIXTURE)


def early_epoch_scores(
    scoring: HeldOutScoring,
    data: RunData,
    train: TrainingPairs,
    *,
    runtime: Runtime = ON_CPU,
    others: TrainingPairs | None = None,
) -> OutOfFoldScores:
    """Each pair's similarity under one scorer of ``scoring.scorer`` trained on all pairs of
    ``train``, averaged over the scorer's epochs (scored after each): ``score [n_pairs]``, and
    ``others`` for the pairs of ``others`` (which it never trains on)."""
    config, device = scoring.scorer, runtime.device
    scored = train if others is None else TrainingPairs.join([train, others])
    total = np.zeros(len(scored), dtype=np.float64)
    epochs = progress_bar(
        total=config.train.epochs, desc="early scorer", disable=not runtime.progress, leave=False
    )

    def score(trainer: Trainer) -> None:
        with evaluating(*trainer.recipe.models):
            total[:] += pair_similarities(trainer.recipe.models, scored, config.train.eval_batch_size, device)
        epochs.update()

    train_scorer(config, data, train, device, after_epoch=score)
    epochs.close()
    mean = (total / config.train.epochs).astype(np.float32)
    return OutOfFoldScores(
        mean[: len(train)],
        np.zeros((0, len(train)), dtype=np.int64),
        None if others is None else mean[len(train) :],
    )

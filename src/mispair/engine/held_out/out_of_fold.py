"""One round of out-of-fold scoring of pairs dealt into folds (and decoys) once per scoring
(:mod:`~mispair.engine.held_out.sampling`): train a scorer per held-out fold (or read it back
from the stash), score the fold it held out and the other splits, and sum the scores over the
repeats and the processes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np
from torch import Tensor

from mispair.data.batching import TrainingPairs
from mispair.distributed import sum_over
from mispair.engine.assembly import RunData
from mispair.engine.held_out.answers import with_answers
from mispair.engine.held_out.decoys import local_decoys
from mispair.engine.held_out.kinds import SCORE_KINDS, KindSettings, scores_and_decoys
from mispair.engine.held_out.plan import FIRST_ROUND, ON_CPU, HeldOutPlan, HeldOutScoring, RoundStart, Runtime
from mispair.engine.held_out.sampling import DealtPairs, contrast_groups, deal_pairs, grouped_scores, sampled
from mispair.engine.held_out.scorers import ScorerRun, trained_scorers
from mispair.nn.model import RetrievalModel
from mispair.progress import progress_bar


@dataclass(frozen=True)
class OutOfFoldScores:
    """``score [n_pairs]``: each training pair's score under the models that held it out, the mean
    over the repeats (higher = more likely matched); ``fold [repeats, n_pairs]``: the fold that held
    the pair out in each repeat's partition; ``others [n_others]``: each pair of the other splits
    (cross-fitting: none of the scorers saw them), the mean over every scorer; ``scorers``: the
    weights of the scorers this process trained (for warm-started refinement rounds)."""

    score: np.ndarray
    fold: np.ndarray
    others: np.ndarray | None = None
    scorers: dict[int, dict[str, Tensor]] | None = None
    """This process's scorers' weights by job (``repeat × folds + fold``), when asked to keep them."""
    null: np.ndarray | None = None
    """``[m]``: the decoy pairs' scores (:mod:`mispair.engine.held_out.decoys`), each the mean over
    the repeats like a training pair's; None where the score kind has no decoys."""
    null_others: np.ndarray | None = None
    """``[m_others]``: decoys of the other splits, each the mean over every scorer like theirs."""
    decoys: np.ndarray | None = None
    """``[m, 2]``: the training pairs' decoys, ``(caption, pair whose picture it is shown with)``."""


@dataclass(frozen=True)
class _RoundPlan:
    """One round of out-of-fold scoring, fixed before a scorer trains: the ``scoring`` (the
    scorers' run config, the plan, the seeds), the ``dealt`` pairs, what the round starts from
    (``start``) and where it runs (``runtime``)."""

    scoring: HeldOutScoring
    dealt: DealtPairs
    start: RoundStart
    runtime: Runtime

    @property
    def plan(self) -> HeldOutPlan:
        return self.scoring.plan

    @property
    def jobs(self) -> range:
        """This process's jobs (``repeat × folds + fold``)."""
        shard = self.runtime.shard
        return range(shard.rank, self.plan.repeats * self.plan.folds, shard.world)

    def held_out(self, job: int) -> np.ndarray:
        """The training pairs ``job``'s scorer holds out."""
        return np.flatnonzero(self.dealt.fold[job // self.plan.folds] == job % self.plan.folds)

    def scorer(self, job: int) -> ScorerRun:
        """``job``'s scorer: its seed, the pairs it trains on and the weights it starts from."""
        repeat, k = divmod(job, self.plan.folds)
        seed = self.scoring.seeds.scorers[repeat][k]
        held_out = self.dealt.fold[repeat] == k
        training = ~held_out
        trusted = self.start.trusted
        if trusted is not None:
            training = training & (trusted[job] if trusted.ndim == 2 else trusted)
        training = with_answers(training, held_out, self.scoring.judged)
        scorer = self.scoring.scorer
        epochs = scorer.train.epochs if self.start.epochs is None else self.start.epochs
        config = replace(scorer, train=replace(scorer.train, seed=seed, epochs=epochs))
        start = None if self.start.start is None else self.start.start[job]
        return ScorerRun(job, config, sampled(np.flatnonzero(training), self.plan.scorer_pairs, seed), start)


def out_of_fold_scores(
    scoring: HeldOutScoring,
    data: RunData,
    train: TrainingPairs,
    *,
    others: TrainingPairs | None = None,
    runtime: Runtime = ON_CPU,
    round_start: RoundStart = FIRST_ROUND,
) -> OutOfFoldScores:
    """Score every pair of ``train`` with a model that never saw it (:mod:`mispair.engine.held_out`).

    Each fold's model is built, trained and scored as ``scoring.scorer`` says (recipe, model,
    train settings and epochs; a plain ``vse`` scorer is the usual choice) on the pairs of the
    other folds, with the pairing of ``train`` (noisy or not), ``plan.repeats`` partitions into
    ``plan.folds`` folds (a pair's score the mean over them), each scored as ``plan.score_kind``.
    ``others`` (the dev and test splits) no scorer trains on: every scorer scores them too
    (cross-fitting), in groups of a fold's size, and each gets the mean of its ``repeats × k``
    scores. ``round_start``: which pairs the scorers train on and what they start from;
    ``runtime``: where it runs (:class:`~mispair.engine.held_out.plan.Runtime`). The pairs are
    dealt (:func:`~mispair.engine.held_out.sampling.deal_pairs`), then scored
    (:func:`scored_round`)."""
    dealt = deal_pairs(scoring, train, others, data.train.n_images)
    return scored_round(scoring, data, train, dealt, runtime, round_start)


def scored_round(
    scoring: HeldOutScoring,
    data: RunData,
    train: TrainingPairs,
    dealt: DealtPairs,
    runtime: Runtime = ON_CPU,
    round_start: RoundStart = FIRST_ROUND,
) -> OutOfFoldScores:
    """One round of :func:`out_of_fold_scores` of ``train`` as ``dealt`` before (every round of a
    scoring deals its pairs alike)."""
    round_plan = _RoundPlan(scoring, dealt, round_start, runtime)
    done, todo = _kept_or_todo(round_plan, train)
    settings = KindSettings(scoring.plan.tau, scoring.scorer.train.eval_batch_size, runtime.device)
    trained = trained_scorers(todo, data, train, runtime.device, runtime.train_fold)
    for run, model in progress_bar(
        trained, total=len(todo), desc="out-of-fold scorers", disable=not runtime.progress, leave=False
    ):
        weights = {name: t.detach().cpu().clone() for name, t in model.state_dict().items()}
        kept = _scored(model, run, train, round_plan, settings)
        if runtime.stash is not None:
            runtime.stash.save(
                round_start.index, run.job, kept, weights if round_start.keep_scorers else None
            )
        done[run.job] = (kept, weights)
    return _summed(train, round_plan, done)


Kept = dict[int, tuple[np.ndarray, dict[str, Tensor] | None]]
"""Each job's kept scores (as stashed) and its scorer's weights (None: not kept)."""


def _kept_or_todo(round_plan: _RoundPlan, train: TrainingPairs) -> tuple[Kept, list[ScorerRun]]:
    """This process's jobs: those the stash kept (their scores and weights), and the scorers to train."""
    stash, keep, dealt = round_plan.runtime.stash, round_plan.start.keep_scorers, round_plan.dealt
    done: Kept = {}
    todo: list[ScorerRun] = []
    for job in round_plan.jobs:
        kept = None if stash is None else stash.load(round_plan.start.index, job)
        weights = None if stash is None or not keep else stash.load_weights(round_plan.start.index, job)
        held_out = round_plan.held_out(job)
        held_decoys = len(local_decoys(dealt.decoys, held_out, len(train))[0])
        size = len(held_out) + dealt.n_others + held_decoys + len(dealt.other_decoys)
        if kept is not None and len(kept) == size and not (keep and weights is None):
            done[job] = (kept, weights)
        else:
            todo.append(round_plan.scorer(job))
    return done, todo


def _scored(
    model: RetrievalModel,
    run: ScorerRun,
    train: TrainingPairs,
    round_plan: _RoundPlan,
    settings: KindSettings,
) -> np.ndarray:
    """What one trained scorer keeps: its held-out pairs' scores, the other splits', then the
    decoys' of both, in one array (as stashed)."""
    dealt = round_plan.dealt
    score = partial(scores_and_decoys, model, kind=round_plan.plan.score_kind, settings=settings)
    held_out = round_plan.held_out(run.job)
    held = train.subset(held_out)
    local = local_decoys(dealt.decoys, held_out, len(train))[1]
    group_of_held = contrast_groups(dealt.content, held, run.seed)
    kept, kept_decoys = grouped_scores(score, held, group_of_held, local)
    if dealt.others is not None and dealt.group is not None:
        other_kept, other_kept_decoys = grouped_scores(score, dealt.others, dealt.group, dealt.other_decoys)
        kept = np.concatenate([kept, other_kept])
        kept_decoys = np.concatenate([kept_decoys, other_kept_decoys])
    return np.concatenate([kept, kept_decoys])


def _summed(train: TrainingPairs, round_plan: _RoundPlan, done: Kept) -> OutOfFoldScores:
    """Every job's kept scores added up (over this process's jobs, then over the processes) and
    averaged: each training pair over its repeats, each other pair over every scorer."""
    dealt, plan, shard = round_plan.dealt, round_plan.plan, round_plan.runtime.shard
    n_others, folds, repeats = dealt.n_others, plan.folds, plan.repeats
    total = np.zeros(len(train) + n_others, dtype=np.float32)
    decoy_total = np.zeros(len(dealt.decoys) + len(dealt.other_decoys), dtype=np.float32)
    scorers: dict[int, dict[str, Tensor]] | None = {} if round_plan.start.keep_scorers else None
    for job in round_plan.jobs:
        kept, weights = done[job]
        held_out = round_plan.held_out(job)
        rows = local_decoys(dealt.decoys, held_out, len(train))[0]
        if scorers is not None and weights is not None:  # kept scorers always have their weights
            scorers[job] = weights
        n_scored = len(held_out) + n_others
        total[held_out] += kept[: len(held_out)]
        total[len(train) :] += kept[len(held_out) : n_scored]
        decoy_total[rows] += kept[n_scored : n_scored + len(rows)]
        decoy_total[len(dealt.decoys) :] += kept[n_scored + len(rows) :]
    total, decoy_total = np.split(sum_over(shard, np.concatenate([total, decoy_total])), [len(total)])
    other_scores = None if dealt.others is None else total[len(train) :] / np.float32(repeats * folds)
    null = null_others = None
    if SCORE_KINDS[plan.score_kind].decoys:
        null = decoy_total[: len(dealt.decoys)] / np.float32(repeats)
        null_others = (
            None if dealt.others is None else decoy_total[len(dealt.decoys) :] / np.float32(repeats * folds)
        )
    return OutOfFoldScores(
        total[: len(train)] / np.float32(repeats),
        dealt.fold,
        other_scores,
        scorers,
        null,
        null_others,
        dealt.decoys,
    )

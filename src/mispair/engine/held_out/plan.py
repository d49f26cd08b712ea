"""What a held-out scoring does, read once from a run's ``division`` section: :class:`HeldOutScoring`
(the scorers' run config, the plan, who scores, the seeds), :class:`HeldOutSeeds` (every seed,
derived once), :class:`HeldOutPlan` (the folds, rounds, repeats, score kind and sampling),
:class:`Runtime` (where and how it runs: device, processes, progress, the fold stash) and
:class:`RoundStart` (what one round of out-of-fold scorers starts from). Every function of
:mod:`mispair.engine.held_out` takes these objects instead of a dozen keyword arguments."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch
from torch import Tensor

from mispair.config import DivisionConfig, RunConfig
from mispair.distributed import SINGLE_PROCESS, Shard
from mispair.seeds import child_seed

if TYPE_CHECKING:
    from mispair.engine.held_out.stash import FoldStash
    from mispair.engine.trainer import Trainer

ScoreKind = Literal["similarity", "contrast", "contrast_structure", "gap_corrected"]
"""The names of :data:`~mispair.engine.held_out.kinds.SCORE_KINDS` (``division.pair_score``)."""


@dataclass(frozen=True)
class HeldOutPlan:
    """A run's held-out scoring: ``folds`` (``k``), ``rounds`` (each later round's scorers train on
    the previous round's clean split at ``p_threshold``), ``repeats`` (partitions into ``k`` folds,
    the scores averaged), ``score_kind`` (a name of
    :data:`~mispair.engine.held_out.kinds.SCORE_KINDS`) at temperature ``tau``, ``refine_epochs``
    (warm-started refinement rounds; None: from scratch), ``scorer_pairs`` (the most pairs a
    scorer trains on; None: all), ``reference`` (scorers trained on the truly matched pairs),
    ``nested_trust`` (the last round's trust of a fold decided by the other folds alone) and
    ``trust_pairs`` (the most pairs a nested-trust scorer trains on; None: ``scorer_pairs``)."""

    folds: int = 5
    rounds: int = 1
    repeats: int = 1
    score_kind: ScoreKind = "similarity"
    tau: float = 0.05
    p_threshold: float = 0.5
    refine_epochs: int | None = None
    scorer_pairs: int | None = None
    reference: bool = False
    nested_trust: bool = False
    trust_pairs: int | None = None

    @classmethod
    def of(cls, division: DivisionConfig) -> HeldOutPlan:
        """The plan of a run's ``division`` section."""
        return cls(
            folds=division.folds,
            rounds=division.rounds,
            repeats=division.repeats,
            score_kind=division.pair_score,
            tau=division.tau,
            p_threshold=division.p_threshold,
            refine_epochs=division.refine_epochs,
            scorer_pairs=division.scorer_pairs,
            reference=division.reference,
            nested_trust=division.nested_trust,
            trust_pairs=division.trust_pairs,
        )

    def but(self, **changes: object) -> HeldOutPlan:
        """This plan with ``changes`` (a test's or benchmark's variant)."""
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Runtime:
    """Where a held-out scoring runs: ``device``; ``shard`` (in a multi-process run, this rank
    trains the scorers ``rank, rank + world, ...`` and the scores are summed over the ranks);
    ``progress`` (a bar over the scorers); ``stash`` (finished scorers kept on disk and read back
    on resume); ``train_fold`` (trains one scorer's :class:`~mispair.engine.trainer.Trainer`,
    default ``config.train.epochs`` epochs: a hook for tests, which trains scorers one by one)."""

    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    shard: Shard = SINGLE_PROCESS
    progress: bool = False
    stash: FoldStash | None = None
    train_fold: Callable[[Trainer], None] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", torch.device(self.device))


@dataclass(frozen=True)
class RoundStart:
    """What one round of out-of-fold scorers starts from: its ``index`` (the stash's round),
    ``trusted [n_pairs]`` bool (the scorers train on the trusted pairs of the other folds only;
    ``[jobs, n_pairs]``: each job's own; None: all), ``start`` (each job's initial weights, by
    job; None: fresh), whether to ``keep_scorers`` (return this process's trained weights, for a
    warm-started next round) and the scorers' ``epochs`` (a warm-started round's own, shorter
    schedule; None: the scorer's)."""

    index: int = 0
    trusted: np.ndarray | None = None
    start: dict[int, dict[str, Tensor]] | None = None
    keep_scorers: bool = False
    epochs: int | None = None


ON_CPU = Runtime()
"""One process on the CPU, quiet, nothing stashed."""

FIRST_ROUND = RoundStart()
"""A round of fresh scorers trained on every pair of the other folds."""


@dataclass(frozen=True)
class HeldOutSeeds:
    """Every seed of a held-out scoring, derived once from the scorers' run seed with
    :func:`~mispair.seeds.child_seed`: each repeat's partition into folds (``repeats``), each
    scorer's (``scorers[repeat][fold]``: its run seed, its sample of pairs, its contrast groups),
    the training pairs' ``decoys``, and the other splits' groups (``other_groups``: the run seed
    itself) and decoys (``other_decoys``: the training decoys' seed + 1)."""

    repeats: tuple[int, ...]
    scorers: tuple[tuple[int, ...], ...]
    decoys: int
    other_groups: int
    other_decoys: int

    @classmethod
    def of(cls, run_seed: int, repeats: int, folds: int) -> HeldOutSeeds:
        """The seeds of ``repeats`` partitions into ``folds`` folds of a run seeded ``run_seed``."""
        repeat_seeds = tuple(child_seed(run_seed, "repeat", r) for r in range(repeats))
        scorers = tuple(
            tuple(child_seed(seed, "fold", k, folds) for k in range(folds)) for seed in repeat_seeds
        )
        decoys = child_seed(run_seed, "decoys")
        return cls(repeat_seeds, scorers, decoys, int(run_seed), decoys + 1)


@dataclass(frozen=True)
class HeldOutScoring:
    """A run's held-out scoring, its ``division`` section read once: the scorers' run config
    (``scorer``: the run's data, model and train settings with the ``vse`` recipe, the
    ``division.scorer_options`` options and ``division.epochs`` epochs at a constant learning
    rate), the :class:`HeldOutPlan`, who scores the pairs (``scored_by``) and the
    :class:`HeldOutSeeds` of the scorer's seed (derived on construction); ``judged``: ``[n_pairs]``
    a person's answers on the training pairs (1 mismatched, 0 correct, NaN not judged; see
    :mod:`~mispair.engine.held_out.answers`), or None. What lies below
    :func:`~mispair.engine.held_out.entry.division_scores` reads these, never the run's config;
    a test or benchmark builds one from any scorer config and plan."""

    scorer: RunConfig
    plan: HeldOutPlan = HeldOutPlan()
    scored_by: Literal["in_sample", "out_of_fold", "early"] = "out_of_fold"
    judged: np.ndarray | None = field(default=None, repr=False, compare=False)
    seeds: HeldOutSeeds = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        seeds = HeldOutSeeds.of(self.scorer.train.seed, self.plan.repeats, self.plan.folds)
        object.__setattr__(self, "seeds", seeds)

    @classmethod
    def of(cls, config: RunConfig) -> HeldOutScoring:
        """The held-out scoring of ``config``."""
        division = config.division
        train = replace(config.train, epochs=division.epochs, lr_decay_epochs=[])
        scorer = replace(config, recipe="vse", method=dict(division.scorer_options), train=train)
        return cls(scorer, HeldOutPlan.of(division), division.scored_by)

    def but(self, **changes: object) -> HeldOutScoring:
        """This scoring with its plan's ``changes`` (:meth:`HeldOutPlan.but`)."""
        return replace(self, plan=self.plan.but(**changes))

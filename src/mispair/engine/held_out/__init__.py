"""Pair scores the scoring model has not memorised: out-of-fold and early-epoch similarities.

A division that scores the pairs its own model trained on sees the mismatched pairs fitted
within a few epochs on a small collection (in-sample detection AUC falls towards 0.5). Here:

- **out of fold**: the training pairs are split into ``k`` folds by their content: the images
  that share an identical caption or nearly duplicate each other stay in one fold
  (:mod:`mispair.data.content`); each fold is scored by a model trained on the other ``k − 1``
  folds only, so neither the caption text nor the picture (under any name) of a scored pair was
  ever trained on by the model that scores it, and the folds do not depend on the row order;
  ``repeats`` partitions of the groups, each pair's score the mean of its repeats (the mean of
  several held-out scorers varies less than one: on Tux Paint at 0.4, detection AUC 0.85 → 0.90
  with 3 repeats and 3 rounds instead of 1 and 2); each later round trains on the pairs the
  round before trusted, with ``nested_trust`` (the audit's default) trust decided by scorers
  that held out every fold a later scorer holds out (:mod:`~mispair.engine.held_out.nested`);
- **early**: one model trained on all pairs, each pair's similarity averaged over its first
  epochs, before the mismatched pairs are fitted (one training instead of ``k``: for large data).

:func:`division_scores` computes what a run's ``division`` section asks for, once per run (kept
in the run's folder as ``pair_scores.npz``); the division recipes fit their mixtures to these
scores instead of their own losses, and ``--export-pairs`` writes them. In a multi-process run the
folds are dealt over the ranks (each trains its folds' scorers alone) and every rank gets every
score.

The rooms, one job each: :mod:`~mispair.engine.held_out.entry` (the entry point and its cache),
:mod:`~mispair.engine.held_out.plan` (the division section read once: :class:`HeldOutScoring`,
its :class:`HeldOutPlan` and :class:`HeldOutSeeds`, and where it runs: :class:`Runtime`),
:mod:`~mispair.engine.held_out.stash` and :mod:`~mispair.engine.held_out.sampling` (the fold stash;
the pairs dealt once into folds, groups and decoys; samples),
:mod:`~mispair.engine.held_out.kinds` (the score kinds, a name → function table),
:mod:`~mispair.engine.held_out.contrast`, :mod:`~mispair.engine.held_out.decoys`,
:mod:`~mispair.engine.held_out.scorers` and :mod:`~mispair.engine.held_out.side_by_side` (scorer
training), :mod:`~mispair.engine.held_out.out_of_fold` (one round) and
:mod:`~mispair.engine.held_out.rounds` (refinement rounds, the early scorer) with
:mod:`~mispair.engine.held_out.nested` (their trust down a lattice of held-out folds),
:mod:`~mispair.engine.held_out.answers` (a person's answers in the scoring, ``division.answers``)
checked against :mod:`~mispair.engine.held_out.audit_rows` (the pairs as the audit names them, and
the audit's id of them) before any scorer trains.
"""

from mispair.engine.held_out.entry import division_scores
from mispair.engine.held_out.kinds import SCORE_KINDS, KindSettings, held_out_scores, scores_and_decoys
from mispair.engine.held_out.out_of_fold import OutOfFoldScores, out_of_fold_scores
from mispair.engine.held_out.plan import (
    HeldOutPlan,
    HeldOutScoring,
    HeldOutSeeds,
    RoundStart,
    Runtime,
    ScoreKind,
)
from mispair.engine.held_out.rounds import early_epoch_scores, refined_out_of_fold_scores
from mispair.engine.held_out.scorers import train_scorer
from mispair.engine.held_out.stash import FoldStash

__all__ = [
    "SCORE_KINDS",
    "FoldStash",
    "HeldOutPlan",
    "HeldOutScoring",
    "HeldOutSeeds",
    "KindSettings",
    "OutOfFoldScores",
    "RoundStart",
    "Runtime",
    "ScoreKind",
    "division_scores",
    "early_epoch_scores",
    "held_out_scores",
    "out_of_fold_scores",
    "refined_out_of_fold_scores",
    "scores_and_decoys",
    "train_scorer",
]

"""The entry point: the held-out scores a run's ``division`` section asks for, computed once per
run and kept in its folder (``pair_scores.npz``), read back when the same scores are asked again."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from mispair.config import RunConfig
from mispair.data.batching import TrainingPairs
from mispair.distributed import broadcast, from_main
from mispair.division.scores import DivisionScores
from mispair.engine.assembly import REFERENCE_NEEDS_NOISE, RunData
from mispair.engine.held_out.answers import answers_key, judged_pairs
from mispair.engine.held_out.audit_rows import AuditRows
from mispair.engine.held_out.decoys import DECOYS_PER_PAIR
from mispair.engine.held_out.out_of_fold import OutOfFoldScores, out_of_fold_scores
from mispair.engine.held_out.plan import HeldOutScoring, RoundStart, Runtime
from mispair.engine.held_out.rounds import early_epoch_scores, refined_out_of_fold_scores
from mispair.engine.held_out.sampling import FOLDS_BY
from mispair.engine.held_out.stash import FoldStash
from mispair.errors import ConfigError


def division_scores(
    config: RunConfig,
    data: RunData,
    train: TrainingPairs,
    runtime: Runtime,
    *,
    cache: Path | None = None,
    others: TrainingPairs | None = None,
) -> DivisionScores | None:
    """The scores ``config.division`` asks for (higher = more likely matched), or None for
    ``in_sample``: of the training pairs and, given ``others`` (the dev and test pairs), of those
    too, scored by the same scorers, none of which trained on them. ``config`` is read once, into
    a :class:`~mispair.engine.held_out.plan.HeldOutScoring` (the plan and the scorers' config),
    which is all the scoring below reads. With ``cache`` (a run's ``pair_scores.npz``), scores
    computed for the same data, model, scorer and seed are read back instead of trained again,
    and the folds an interrupted out-of-fold scoring finished are kept beside it
    (``pair_scores.folds/``). In a multi-process run (``runtime.shard``) every rank calls it and
    gets rank 0's scores: the out-of-fold folds are dealt over the ranks (each keeps its own
    finished folds); the early scorer is trained by every rank (no rank waits idle on another)
    and rank 0's scores kept; rank 0 reads and writes the cache."""
    scoring = HeldOutScoring.of(config)
    if scoring.scored_by == "in_sample":
        return None
    if config.division.answers:  # checked against the collection before any scorer trains
        judged = judged_pairs(config.division.answers, _audit_rows(config, data, train, others))
        scoring = replace(scoring, judged=judged)
    key, shard = _scores_key(scoring, train, others), runtime.shard
    cached = from_main(shard, lambda: None if cache is None else DivisionScores.read(cache, key))
    if cached is not None:
        return replace(cached, judged=scoring.judged)
    stash = None if cache is None else FoldStash(cache.with_suffix(".folds"), key)
    found = _scored(scoring, data, train, replace(runtime, stash=stash), others)
    scores = DivisionScores(found.score, found.others, found.null, found.null_others, scoring.judged)
    if cache is not None and shard.is_main:
        scores.save(cache, key)
    if stash is not None and shard.is_main:  # every rank's folds were summed into the scores
        stash.clear()
    return scores


def _scored(
    scoring: HeldOutScoring,
    data: RunData,
    train: TrainingPairs,
    runtime: Runtime,
    others: TrainingPairs | None,
) -> OutOfFoldScores:
    """The scores of ``scoring.scored_by`` (``out_of_fold`` or ``early``), computed; ``runtime``'s
    stash keeps the out-of-fold rounds' finished folds."""
    if scoring.scored_by == "out_of_fold" and scoring.plan.reference:
        return _reference_scores(scoring, data, train, runtime, others)
    if scoring.scored_by == "out_of_fold":
        return refined_out_of_fold_scores(scoring, data, train, others=others, runtime=runtime)
    return broadcast(runtime.shard, early_epoch_scores(scoring, data, train, runtime=runtime, others=others))


def _reference_scores(
    scoring: HeldOutScoring,
    data: RunData,
    train: TrainingPairs,
    runtime: Runtime,
    others: TrainingPairs | None,
) -> OutOfFoldScores:
    """The clean-trained reference division (``division.reference``): out-of-fold scores of
    scorers trained on the truly matched pairs of the other folds, one round."""
    if data.noise is None or not data.noise.is_noisy.any():
        raise ConfigError(REFERENCE_NEEDS_NOISE)
    return out_of_fold_scores(
        scoring,
        data,
        train,
        others=others,
        runtime=Runtime(runtime.device, runtime.shard),
        round_start=RoundStart(trusted=~data.noise.is_noisy),
    )


def _audit_rows(
    config: RunConfig, data: RunData, train: TrainingPairs, others: TrainingPairs | None
) -> AuditRows:
    """The training pairs, then the dev and test pairs (when scored), as the audit names them."""
    split = [config.data.train_split] * len(train)
    if others is not None:
        n_dev = data.dev.n_captions
        split += [config.data.dev_split] * n_dev + [config.data.test_split] * (len(others) - n_dev)
    return AuditRows.of(train, others, split)


def _scores_key(scoring: HeldOutScoring, train: TrainingPairs, others: TrainingPairs | None = None) -> str:
    """What the scores depend on: the scoring run's settings, how folds are dealt
    (:data:`~mispair.engine.held_out.sampling.FOLDS_BY`) and the pairing scored (and the other
    splits' pairing when they are scored too)."""
    settings = {k: v for k, v in asdict(scoring.scorer).items() if k not in ("name", "output")}
    settings["division"].pop("answers", None)  # the answers themselves enter below
    if settings["division"].get("trust_pairs") is None:  # unset: the scores of before, the keys of before
        settings["division"].pop("trust_pairs", None)
    settings["folds_by"] = FOLDS_BY
    settings["decoys_per_pair"] = DECOYS_PER_PAIR
    digest = hashlib.blake2b(json.dumps(settings, sort_keys=True, default=str).encode(), digest_size=16)
    digest.update(np.ascontiguousarray(train.image_of_caption).tobytes())
    digest.update(answers_key(scoring.judged).encode())  # nothing without answers: earlier keys hold
    if others is not None:
        digest.update(b"others")
        digest.update(np.ascontiguousarray(others.image_of_caption).tobytes())
    return digest.hexdigest()

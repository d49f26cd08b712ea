"""A person's answers in the held-out scoring (``division.answers``, ``mispair audit --labels``):
the pairs judged correct are trusted by every scorer that may train on them (one that does not
hold out their fold), whatever a refinement round decided; the pairs judged mismatched train no
scorer. A pair's own score still comes from scorers that never saw it; what changes is what the
other folds teach them (cross-fitting: the estimate on the answers stays valid as in
cross-prediction-powered inference, Zrnic & Candès, PNAS 2024)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mispair.data.batching import TrainingPairs
from mispair.errors import DataError


def judged_pairs(
    paths: Sequence[str | Path], train: TrainingPairs, train_split: str, others: Sequence[str] = ()
) -> np.ndarray:
    """``[len(train)]`` the answers of the labels files at ``paths`` (several reviewers' merged: a
    disagreement is unsure) on the training pairs: 1 mismatched, 0 correct, NaN not judged or
    unsure. The pairs are named as the audit names them (the reader's ids, else
    ``<split>/<k>``); an answer on a pair of the other splits (``others``: their ids) trains
    nothing and is allowed, one on no pair of the collection is refused."""
    from mispair.estimate.labels import merge_labels, read_labels

    labels = merge_labels([read_labels(path) for path in paths]).labels
    path = ", ".join(map(str, paths))
    ids = train_pair_ids(train, train_split)
    position = {pair_id: k for k, pair_id in enumerate(ids)}
    elsewhere = set(others)
    unknown = [i for i in labels["pair_id"] if i not in position and i not in elsewhere]
    if unknown:
        raise DataError(
            f"{path}: pair {unknown[0]!r} is in no split of this collection ({len(unknown)} such "
            "answer(s)); were the answers given on another collection?"
        )
    judged = np.full(len(train), np.nan)
    for pair_id, label in zip(labels["pair_id"], labels["label"]):
        if pair_id in position and label != "unsure":
            judged[position[pair_id]] = 1.0 if label == "mismatched" else 0.0
    return judged


def train_pair_ids(train: TrainingPairs, train_split: str) -> list[str]:
    """The training pairs' ids as the audit writes them: the reader's, else ``<split>/<k>``."""
    if train.pairs.pair_ids is not None:
        return [str(i) for i in train.pairs.pair_ids]
    return [f"{train_split}/{k}" for k in range(len(train))]


def with_answers(training: np.ndarray, held_out: np.ndarray, judged: np.ndarray | None) -> np.ndarray:
    """``[n_pairs]`` bool: the pairs a scorer trains on, given the answers ``judged``: those of
    ``training`` not judged mismatched, and every pair judged correct outside ``held_out`` (the
    pairs the scorer must not see)."""
    if judged is None:
        return training
    return (training & ~(judged == 1)) | ((judged == 0) & ~held_out)


def answers_key(judged: np.ndarray | None) -> str:
    """What the scores depend on from the answers (empty without any)."""
    if judged is None:
        return ""
    return hashlib.blake2b(
        np.nan_to_num(judged, nan=-1.0).astype(np.int8).tobytes(), digest_size=8
    ).hexdigest()

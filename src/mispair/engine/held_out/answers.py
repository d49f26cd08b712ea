"""A person's answers in the held-out scoring (``division.answers``, ``mispair audit --labels``):
the pairs judged correct are trusted by every scorer that may train on them (one that does not
hold out their fold), whatever a refinement round decided; the pairs judged mismatched train no
scorer. A pair's own score still comes from scorers that never saw it; what changes is what the
other folds teach them (cross-fitting: the estimate on the answers stays valid as in
cross-prediction-powered inference, Zrnic & Candès, PNAS 2024)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mispair.engine.held_out.audit_rows import AuditRows
from mispair.errors import DataError

if TYPE_CHECKING:
    import pandas as pd


def judged_pairs(paths: Sequence[str | Path], rows: AuditRows) -> np.ndarray:
    """``[rows.n_train]`` the answers of the labels files at ``paths`` (several reviewers' merged:
    a disagreement is unsure) on the training pairs: 1 mismatched, 0 correct, NaN not judged or
    unsure. Checked before any scorer trains, as ``mispair estimate`` checks them: a file whose
    ``audit_id`` names another audit than these ``rows``' is refused (rows without the column
    are taken), as is an answer on no pair of the collection; an answer on a dev or test pair
    trains nothing and is allowed."""
    labels = read_answers(paths, audit=rows.audit_id)
    return judged_on(labels, rows.pair_ids, ", ".join(map(str, paths)))[: rows.n_train]


def read_answers(paths: Sequence[str | Path], *, audit: str | None = None) -> pd.DataFrame:
    """The labels files at ``paths`` merged (``pair_id``, ``label``; a pair the reviewers judged
    differently is ``unsure``), each refused in one line where its ``audit_id`` is not ``audit``."""
    from mispair.estimate.labels import merge_labels, read_labels

    return merge_labels([read_labels(path, audit=audit) for path in paths]).labels


def judged_on(labels: pd.DataFrame, pair_ids: Sequence[str], where: str) -> np.ndarray:
    """``[len(pair_ids)]`` the ``labels`` on the pairs ``pair_ids``: 1 mismatched, 0 correct, NaN
    not judged or unsure; an answer on none of them is refused in one line (``where``: the files)."""
    position = {str(pair_id): k for k, pair_id in enumerate(pair_ids)}
    unknown = [i for i in labels["pair_id"] if i not in position]
    if unknown:
        raise DataError(
            f"{where}: pair {unknown[0]!r} is in no split of this collection ({len(unknown)} such "
            "answer(s)); were the answers given on another collection?"
        )
    judged = np.full(len(pair_ids), np.nan)
    for pair_id, label in zip(labels["pair_id"], labels["label"]):
        if label != "unsure":
            judged[position[pair_id]] = 1.0 if label == "mismatched" else 0.0
    return judged


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


def answers_overrides(labels: Sequence[str | Path]) -> list[str]:
    """The run's ``division.answers`` for the labels files (absolute paths; each checked to be a
    readable labels file before anything trains)."""
    if not labels:
        return []
    from mispair.estimate.labels import read_labels

    for path in labels:
        read_labels(path)  # a missing or malformed file: one line now, not after the scorers
    return [f"division.answers={json.dumps([str(Path(p).resolve()) for p in labels])}"]

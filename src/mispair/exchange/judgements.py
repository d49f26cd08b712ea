"""A person's answers from another tool turned into mispair's two files: the labels file
(``pair_id,label``, read by ``mispair estimate``) and the decisions file
(``pair_id,decision,caption``, read by ``mispair apply``).

The answers come as a table of judgements, one row per reviewer and pair: ``pair_id``,
``reviewer``, ``label`` (``correct``, ``mismatched`` or ``unsure``), ``caption`` (a corrected
caption, or ""). The reviewers' labels merge with :func:`mispair.estimate.labels.merge_labels`
(a pair they judged differently is ``unsure`` and listed). The decision of a merged label:
``correct`` → keep; ``mismatched`` → replace when its reviewers wrote one corrected caption,
drop when they wrote none, drop and listed when they wrote different ones; ``unsure`` → no
decision (``apply`` keeps a pair it has no decision for).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mispair.atomic import atomic_write
from mispair.errors import DataError
from mispair.estimate.labels import (
    NAME_CHARS,
    MergedLabels,
    check_reviewers,
    merge_labels,
    read_labels,
)
from mispair.safe_io import shown, write_csv

if TYPE_CHECKING:
    import pandas as pd

JUDGEMENT_COLUMNS = ("pair_id", "reviewer", "label", "caption")
"""The columns of a table of judgements (one row per reviewer and pair)."""


@dataclass(frozen=True)
class Review:
    """Judgements merged: ``merged`` (the labels, the disagreements, Cohen's κ of each two
    reviewers), ``decisions`` (``pair_id``, ``decision``, ``caption``: one row per pair with a
    firm label), ``caption_conflicts`` (``pair_id`` and the corrected captions its reviewers
    wrote, where they wrote different ones: the pair is dropped, not re-captioned)."""

    merged: MergedLabels
    decisions: pd.DataFrame
    caption_conflicts: pd.DataFrame

    @property
    def labels(self) -> pd.DataFrame:
        """``pair_id``, ``label``: every pair judged, a disagreement ``unsure``."""
        return self.merged.labels


def review_of(judgements: pd.DataFrame, pair_ids: Iterable[str]) -> Review:
    """Merge ``judgements`` (columns :data:`JUDGEMENT_COLUMNS`) of pairs of an audit whose pair
    ids are ``pair_ids``. Refused in one line: no judgement, a pair the audit does not have, a
    label not in ``LABELS`` (:mod:`mispair.estimate.labels`), a reviewer judging a pair two ways."""
    _check_pairs(judgements, set(pair_ids))
    groups = judgements.groupby("reviewer", sort=False)  # one pass, however many reviewers
    check_reviewers(groups.ngroups)
    reviewers, tables = [], []
    for who, part in groups:
        reviewers.append(str(who))
        answers = part[["pair_id", "label"]].reset_index(drop=True)
        tables.append(read_labels(answers, where=f"the answers of {shown(who, NAME_CHARS)}"))
    merged = merge_labels(tables, reviewers)
    decisions, conflicts = _decisions(merged.labels, judgements)
    return Review(merged, decisions, conflicts)


def _check_pairs(judgements: pd.DataFrame, known: set[str]) -> None:
    if not len(judgements):
        raise DataError("no answer found: judge some pairs first (an unfinished or skipped task has none)")
    unknown = judgements.loc[~judgements["pair_id"].isin(known), "pair_id"]
    if len(unknown):
        raise DataError(
            f"pair {shown(unknown.iloc[0])!r} is not in this audit ({unknown.nunique()} such pair(s)); "
            "give the answers on this audit's export"
        )


def _decisions(labels: pd.DataFrame, judgements: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The decision of each firmly labelled pair, and the pairs whose corrected captions differ."""
    import pandas as pd

    wrong = judgements[(judgements["label"] == "mismatched") & (judgements["caption"].str.strip() != "")]
    written = wrong.groupby("pair_id", sort=False)["caption"].agg(
        lambda c: list(dict.fromkeys(c.str.strip()))
    )
    rows, conflicts = [], []
    for pair_id, label in zip(labels["pair_id"], labels["label"]):
        if label == "correct":
            rows.append((pair_id, "keep", ""))
        elif label == "mismatched":
            captions = written.get(pair_id, [])
            if len(captions) > 1:
                conflicts.append((pair_id, " | ".join(captions)))
            rows.append((pair_id, "replace", captions[0]) if len(captions) == 1 else (pair_id, "drop", ""))
    decisions = pd.DataFrame(rows, columns=["pair_id", "decision", "caption"], dtype=object)
    return decisions, pd.DataFrame(conflicts, columns=["pair_id", "captions"], dtype=object)


def write_labels(
    review: Review, path: str | Path, audit_id: str | None, *, only: Iterable[str] | None = None
) -> Path:
    """Write the merged labels as a labels file (``pair_id,label``, and ``audit_id`` when
    known: ``mispair estimate`` then refuses it on another audit); with ``only``, those pairs'
    (the answers on the audit's random sample, which the estimate takes)."""
    table = review.labels[["pair_id", "label"]].copy()
    if only is not None:
        table = table[table["pair_id"].isin(set(only))]
    if audit_id:
        table["audit_id"] = audit_id
    return _write(table, path)


def write_decisions(review: Review, path: str | Path) -> Path:
    """Write the decisions file (``pair_id,decision,caption``) ``mispair apply`` reads."""
    return _write(review.decisions, path)


def _write(table: pd.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path}: is a folder; give a file name ending in .csv")
    atomic_write(path, lambda handle: write_csv(table, handle))
    return path

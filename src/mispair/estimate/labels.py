"""A person's judgements of pairs: the labels file, read, checked and merged over reviewers.

A labels file is a CSV with ``pair_id,label`` (``label``: ``correct``, ``mismatched`` or
``unsure``; optional ``order``, ``audit_id``, ``reviewer`` columns are read where present). The
review page's decisions file is read as labels too: ``keep`` → correct, ``drop`` or ``replace``
→ mismatched. Several reviewers' files merge into one table: where they agree, their label;
where they disagree, ``unsure`` (the estimate then bounds the pair either way) and the
disagreement listed, with Cohen's κ between each two reviewers.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.errors import DataError
from mispair.limits import limit, raise_hint
from mispair.safe_io import read_input, spreadsheet_text

if TYPE_CHECKING:
    import pandas as pd

LABELS = ("correct", "mismatched", "unsure")
"""A judgement of a pair: its caption describes its picture, does not, or the person cannot say."""
FROM_DECISION = {"keep": "correct", "drop": "mismatched", "replace": "mismatched"}
"""A review decision read as a judgement (a replaced caption was a wrong one)."""


def pairs_audit_id(pair_ids: Sequence[Any], image_ids: Sequence[object], captions: Sequence[object]) -> str:
    """An audit's id from its pairs: the first 16 hex digits of the SHA-256 of every row's
    ``pair_id``, ``image_id`` and ``caption`` (in pair-id order, joined by the unit and record
    separators). Scores and ranks do not enter, so an audit of the same collection again has the
    same id, and a labels file's ``audit_id`` column names the collection it was given on; the
    audit's table (:func:`mispair.audit.result.audit_id`) and the held-out scorers reading
    ``--labels`` (:mod:`mispair.engine.held_out.audit_rows`) both take it from here."""
    import hashlib

    digest = hashlib.sha256()
    for k in sorted(range(len(pair_ids)), key=lambda k: pair_ids[k]):
        row = (pair_ids[k], image_ids[k], captions[k])
        digest.update("\x1f".join(map(str, row)).encode("utf-8") + b"\x1e")
    return digest.hexdigest()[:16]


def read_labels(source: str | Path | pd.DataFrame, *, audit: str | None = None) -> pd.DataFrame:
    """One reviewer's labels as a table of strings: ``pair_id``, ``label`` (one of
    :data:`LABELS`), one row per pair, in the file's order. ``source``: a labels or decisions CSV
    path, or a DataFrame with those columns. Refused in one line: a missing or unreadable file,
    no row, an unknown label, a pair judged twice differently, an ``audit_id`` other than
    ``audit``."""
    import pandas as pd

    where = "labels" if isinstance(source, pd.DataFrame) else str(source)
    frame = source.fillna("").astype(str) if isinstance(source, pd.DataFrame) else _read_csv(Path(source))
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    if "pair_id" not in frame:
        raise DataError(
            f"{where}: no column 'pair_id'; expected pair_id,label (or the review page's "
            f"pair_id,decision,caption); columns found: {', '.join(frame.columns) or 'none'}"
        )
    _check_audit(frame, where, audit)
    ids = frame["pair_id"].str.strip().map(spreadsheet_text).str.strip()
    if "label" in frame:
        labels = frame["label"].str.strip().str.lower()
    elif "decision" in frame:
        decisions = frame["decision"].str.strip().str.lower()
        labels = decisions.map(FROM_DECISION).fillna(decisions)
    else:
        raise DataError(f"{where}: no column 'label' (correct, mismatched or unsure) nor 'decision'")
    table = pd.DataFrame({"pair_id": ids, "label": labels})
    _check_labels(table, where)
    return table.drop_duplicates().reset_index(drop=True)


def _read_csv(path: Path) -> pd.DataFrame:
    import pandas as pd

    if not path.exists():
        raise DataError(f"--labels {path}: no such file; give the labels file the review page downloaded")
    bound = limit("MAX_DECISIONS_BYTES")
    data = read_input(path, bound, "a labels file", hint=raise_hint("MAX_DECISIONS_BYTES"))
    try:
        return pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text; save the labels as UTF-8") from None
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: empty; give a header pair_id,label and a row per answer") from None
    except (pd.errors.ParserError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: not a readable CSV file ({first})") from None


def _check_audit(frame: pd.DataFrame, where: str, audit: str | None) -> None:
    if audit is None or "audit_id" not in frame:
        return
    others = sorted(set(frame["audit_id"].str.strip()) - {audit, ""})
    if others:
        raise DataError(
            f"{where}: answers given on audit {others[0]}, not on this audit ({audit}); "
            "give the file downloaded from this audit's report"
        )


def _check_labels(table: pd.DataFrame, where: str) -> None:
    if not len(table):
        raise DataError(f"{where}: no answer in it; judge some pairs of the sample first")
    empty = table[table["pair_id"] == ""]
    if len(empty):
        raise DataError(f"{where}: row {int(empty.index[0]) + 2} has no pair_id")
    unknown = table[~table["label"].isin(LABELS)]
    if len(unknown):
        first = unknown.iloc[0]
        raise DataError(
            f"{where}: pair {first['pair_id']!r} has label {first['label']!r}; a label is one of "
            f"{', '.join(LABELS)} ({len(unknown)} row(s) with another)"
        )
    distinct = table.drop_duplicates()
    twice = distinct["pair_id"][distinct["pair_id"].duplicated()]
    if len(twice):
        answers = sorted(distinct.loc[distinct["pair_id"] == twice.iloc[0], "label"])
        raise DataError(
            f"{where}: pair {twice.iloc[0]!r} is judged both {answers[0]} and {answers[1]}; "
            "keep one answer per pair (several reviewers: give each one's file)"
        )


@dataclass(frozen=True)
class MergedLabels:
    """Several reviewers' labels as one: ``labels`` (``pair_id``, ``label``; a pair the reviewers
    judged differently is ``unsure``), ``disagreements`` (``pair_id`` and each reviewer's label,
    a column per reviewer), ``kappa`` (Cohen's κ of each two reviewers over the pairs both judged
    correct or mismatched, keyed ``"A / B"``; None where fewer than two such pairs or one answer
    throughout), ``reviewers`` (their names, e.g. the files')."""

    labels: pd.DataFrame
    disagreements: pd.DataFrame
    kappa: dict[str, float | None]
    reviewers: tuple[str, ...]


def merge_labels(tables: Sequence[pd.DataFrame], reviewers: Sequence[str] | None = None) -> MergedLabels:
    """Merge each reviewer's :func:`read_labels` table: every pair any of them judged, in the
    order first seen; ``unsure`` where two gave different answers (an ``unsure`` beside a firm
    answer is a disagreement too: the pair stays open)."""
    import pandas as pd

    names = tuple(reviewers or (f"reviewer {k + 1}" for k in range(len(tables))))
    if len(names) != len(tables):
        raise ValueError(f"{len(tables)} label tables but {len(names)} reviewer names")
    if len(set(names)) != len(names):
        names = tuple(f"{name} ({k + 1})" for k, name in enumerate(names))
    wide = None
    for name, table in zip(names, tables):
        part = table.set_index("pair_id")["label"].rename(name)
        wide = part.to_frame() if wide is None else wide.join(part, how="outer", sort=False)
    assert wide is not None, "no label table to merge"
    answers = wide.apply(lambda row: set(row.dropna()), axis=1)
    agreed = answers.map(lambda found: next(iter(found)) if len(found) == 1 else "unsure")
    labels = pd.DataFrame({"pair_id": wide.index.astype(str), "label": agreed.to_numpy()})
    split = answers.map(len) > 1
    disagreements = wide[split].reset_index().rename(columns={"index": "pair_id"}).fillna("")
    kappa = {f"{a} / {b}": cohen_kappa(wide[a], wide[b]) for k, a in enumerate(names) for b in names[k + 1 :]}
    return MergedLabels(labels, disagreements, kappa, names)


def cohen_kappa(first: pd.Series, second: pd.Series) -> float | None:
    """Cohen's κ of two reviewers' firm answers (correct / mismatched) on the pairs both judged
    so: (p_o − p_e) / (1 − p_e) (Cohen 1960), by scikit-learn; None where it is undefined (fewer
    than two pairs, or both gave one answer throughout)."""
    from sklearn.metrics import cohen_kappa_score

    both = first.isin(LABELS[:2]) & second.isin(LABELS[:2])
    a, b = first[both], second[both]
    if len(a) < 2 or len(set(a) | set(b)) < 2:
        return None
    return float(cohen_kappa_score(a, b))

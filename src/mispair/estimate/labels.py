"""A person's judgements of pairs: the labels file, read, checked and merged over reviewers.

A labels file is a CSV with ``pair_id,label`` (``label``: ``correct``, ``mismatched`` or
``unsure``; optional ``order``, ``audit_id``, ``reviewer`` columns are read where present). The
review page's decisions file is read as labels too: ``keep`` → correct, ``drop`` or ``replace``
→ mismatched. Several reviewers' files merge into one table: where they agree, their label;
where they disagree, ``unsure`` (the estimate then bounds the pair either way) and the
disagreement listed, with Cohen's κ between each two reviewers (all of them at once, from three
products of the answers' indicator matrices; printed one by one for up to :data:`KAPPA_LISTED`
reviewers, summarised beyond by :class:`KappaSummary`).

A labels file is someone else's text: it is bounded in bytes (``MAX_DECISIONS_BYTES``), lines
(``MAX_TABLE_ROWS``), line length (``MAX_LINE_CHARS``), id length (``MAX_ID_CHARS``) and
reviewers (``MAX_REVIEWERS``) before pandas builds a value, and every value an error names is
cut and terminal-safe (:func:`mispair.safe_io.shown`).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.errors import DataError
from mispair.limits import limit, raise_hint
from mispair.safe_io import listed, read_input, shown, spreadsheet_text
from mispair.safe_parse import check_text_lines

if TYPE_CHECKING:
    import pandas as pd

LABELS = ("correct", "mismatched", "unsure")
"""A judgement of a pair: its caption describes its picture, does not, or the person cannot say."""
FROM_DECISION = {"keep": "correct", "drop": "mismatched", "replace": "mismatched"}
"""A review decision read as a judgement (a replaced caption was a wrong one)."""
COLUMNS = ("pair_id", "label", "decision", "audit_id", "order", "reviewer", "caption")
"""The columns a labels file's reader keeps (any other column is parsed and dropped)."""
KAPPA_LISTED = 10
"""Up to this many reviewers every two reviewers' κ is printed; beyond, a summary."""
KAPPA_WORST = 5
"""The lowest κ values a summary names."""
NAME_CHARS = 40
"""The characters of a reviewer's name a printed line shows."""
DENSE_CELLS = 1 << 24
"""Pairs × reviewers up to which κ's counts are products of dense matrices (else sparse)."""


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


def read_labels(
    source: str | Path | pd.DataFrame, *, audit: str | None = None, where: str | None = None
) -> pd.DataFrame:
    """One reviewer's labels as a table of strings: ``pair_id``, ``label`` (one of
    :data:`LABELS`), one row per pair, in the file's order. ``source``: a labels or decisions CSV
    path, or a DataFrame with those columns. Refused in one line: a missing or unreadable file,
    no row, an unknown label, a pair judged twice differently, an ``audit_id`` other than
    ``audit``, a pair id longer than ``MAX_ID_CHARS``; each error names ``where`` (default: the
    file, or "labels")."""
    import pandas as pd

    where = where or ("labels" if isinstance(source, pd.DataFrame) else str(source))
    frame = source.fillna("").astype(str) if isinstance(source, pd.DataFrame) else _read_csv(Path(source))
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    twice = frame.columns[frame.columns.duplicated()]
    if len(twice):
        raise DataError(f"{where}: the column {shown(twice[0], 40)!r} appears twice; keep one")
    if "pair_id" not in frame:
        found = listed([str(c) for c in frame.attrs.get("found", frame.columns)], chars=40) or "none"
        raise DataError(
            f"{where}: no column 'pair_id'; expected pair_id,label (or the review page's "
            f"pair_id,decision,caption); columns found: {found}"
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
    """The labels file ``path``'s columns of :data:`COLUMNS` as text (the header's every column
    name in ``frame.attrs["found"]``), its bytes and lines checked first."""
    import pandas as pd

    if not path.exists():
        raise DataError(f"--labels {path}: no such file; give the labels file the review page downloaded")
    bound = limit("MAX_DECISIONS_BYTES")
    data = read_input(path, bound, "a labels file", hint=raise_hint("MAX_DECISIONS_BYTES"))
    check_text_lines(data, path)
    options = {"dtype": str, "keep_default_na": False, "encoding": "utf-8-sig"}
    try:
        found = list(pd.read_csv(io.BytesIO(data), nrows=0, **options).columns)
        frame = pd.read_csv(io.BytesIO(data), usecols=lambda c: str(c).strip().lower() in COLUMNS, **options)
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text; save the labels as UTF-8") from None
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: empty; give a header pair_id,label and a row per answer") from None
    except (pd.errors.ParserError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: not a readable CSV file ({shown(first)})") from None
    frame.attrs["found"] = found
    return frame


def _check_audit(frame: pd.DataFrame, where: str, audit: str | None) -> None:
    if audit is None or "audit_id" not in frame:
        return
    others = sorted(set(frame["audit_id"].str.strip()) - {audit, ""})
    if others:
        raise DataError(
            f"{where}: answers given on audit {shown(others[0], 40)}, not on this audit ({audit}); "
            "give the file downloaded from this audit's report"
        )


def _check_labels(table: pd.DataFrame, where: str) -> None:
    if not len(table):
        raise DataError(f"{where}: no answer in it; judge some pairs of the sample first")
    empty = table[table["pair_id"] == ""]
    if len(empty):
        raise DataError(f"{where}: row {int(empty.index[0]) + 2} has no pair_id")
    check_id_lengths(table["pair_id"], where, "pair_id", first_row=2)
    unknown = table[~table["label"].isin(LABELS)]
    if len(unknown):
        first = unknown.iloc[0]
        raise DataError(
            f"{where}: pair {shown(first['pair_id'])!r} has label {shown(first['label'], 40)!r}; a "
            f"label is one of {', '.join(LABELS)} ({len(unknown)} row(s) with another)"
        )
    distinct = table.drop_duplicates()
    twice = distinct["pair_id"][distinct["pair_id"].duplicated()]
    if len(twice):
        answers = sorted(distinct.loc[distinct["pair_id"] == twice.iloc[0], "label"])
        raise DataError(
            f"{where}: pair {shown(twice.iloc[0])!r} is judged both {answers[0]} and {answers[1]}; "
            "keep one answer per pair (several reviewers: give each one's file)"
        )


def check_id_lengths(values: pd.Series, where: str, what: str, *, first_row: int = 1) -> None:
    """Refuse a value of ``values`` (pair ids, reviewers' names) longer than ``MAX_ID_CHARS``,
    naming its row (the first row numbered ``first_row``): an id is a name, not a document."""
    bound = limit("MAX_ID_CHARS")
    long = values.str.len() > bound
    if long.any():
        row = int(long.to_numpy().argmax())
        raise DataError(
            f"{where}: row {row + first_row}: a {what} of {len(values.iloc[row]):,} characters, more "
            f"than the {bound:,} an id may have ({raise_hint('MAX_ID_CHARS')})"
        )


@dataclass(frozen=True)
class MergedLabels:
    """Several reviewers' labels as one: ``labels`` (``pair_id``, ``label``; a pair the reviewers
    judged differently is ``unsure``), ``disagreements`` (``pair_id`` and ``answers``: each
    reviewer who judged the pair and their label, in the reviewers' order), ``kappa`` (Cohen's κ
    of each two reviewers over the pairs both judged correct or mismatched, keyed ``"A / B"``;
    None where fewer than two such pairs or one answer throughout), ``reviewers`` (their names,
    e.g. the files')."""

    labels: pd.DataFrame
    disagreements: pd.DataFrame
    kappa: dict[str, float | None]
    reviewers: tuple[str, ...]

    def agreement(self) -> KappaSummary:
        """:attr:`kappa` summarised (:func:`kappa_summary`)."""
        return kappa_summary(self.kappa)


def merge_labels(tables: Sequence[pd.DataFrame], reviewers: Sequence[str] | None = None) -> MergedLabels:
    """Merge each reviewer's :func:`read_labels` table: every pair any of them judged, in the
    order first seen; ``unsure`` where two gave different answers (an ``unsure`` beside a firm
    answer is a disagreement too: the pair stays open). Linear in the answers (one pass over them
    all, never a table of pairs by reviewers) but for κ (:func:`pairwise_kappa`); at most
    ``MAX_REVIEWERS`` reviewers."""
    import numpy as np
    import pandas as pd

    names = tuple(reviewers or (f"reviewer {k + 1}" for k in range(len(tables))))
    if len(names) != len(tables):
        raise ValueError(f"{len(tables)} label tables but {len(names)} reviewer names")
    assert tables, "no label table to merge"
    check_reviewers(len(names))
    if len(set(names)) != len(names):
        names = tuple(f"{name} ({k + 1})" for k, name in enumerate(names))
    long = pd.concat(
        [table[["pair_id", "label"]].assign(reviewer=k) for k, table in enumerate(tables)],
        ignore_index=True,
    )
    pair, ids = pd.factorize(long["pair_id"])  # the pairs in the order first seen
    kinds = long.groupby(pair, sort=True)["label"].agg(["nunique", "first"])
    split = kinds["nunique"].to_numpy() > 1
    agreed = kinds["first"].where(~split, "unsure")
    labels = pd.DataFrame({"pair_id": ids.astype(str), "label": agreed.to_numpy()})
    apart = split[pair]  # the answers on pairs judged differently, in the reviewers' order
    answers: dict[int, dict[str, str]] = {}
    for at, who, label in zip(
        pair[apart].tolist(), long["reviewer"][apart].tolist(), long["label"][apart].tolist()
    ):
        answers.setdefault(at, {})[names[who]] = label
    disagreements = pd.DataFrame(
        {
            "pair_id": ids.astype(str)[split],
            "answers": pd.Series([answers[k] for k in np.flatnonzero(split).tolist()], dtype=object),
        }
    )
    kappa = pairwise_kappa(pair, long["reviewer"].to_numpy(), long["label"], len(ids), names)
    return MergedLabels(labels, disagreements, kappa, names)


def check_reviewers(count: int) -> None:
    """Refuse more than ``MAX_REVIEWERS`` reviewers (κ compares every two of them)."""
    if count > limit("MAX_REVIEWERS"):
        raise DataError(
            f"{count:,} reviewers, more than the {limit('MAX_REVIEWERS'):,} merged at once "
            f"(every two are compared; {raise_hint('MAX_REVIEWERS')})"
        )


def pairwise_kappa(
    pair: Any, reviewer: Any, label: pd.Series, pairs: int, names: Sequence[str]
) -> dict[str, float | None]:
    r"""Cohen's κ of every two reviewers (keyed ``"A / B"`` in ``names``' order), from the answers
    as three arrays: ``pair [A]`` (a pair's number, < ``pairs``), ``reviewer [A]`` (a number into
    ``names``) and ``label [A]``; over the pairs both judged correct or mismatched (Cohen 1960):

    .. math:: \kappa = \frac{p_o - p_e}{1 - p_e},\quad
        p_o = \frac{n_{cc} + n_{mm}}{n},\quad p_e = \frac{a_c b_c + a_m b_m}{n^2}

    with ``n`` the pairs both judged firmly, ``a_c`` (``b_c``) those the first (second) judged
    correct. Every count for every two reviewers at once, from the sparse indicator matrices
    ``F`` (a firm answer) and ``C`` (correct) ``[pairs, R]``: ``n = FᵀF``, ``n_cc = CᵀC``,
    ``a_c = CᵀF``, ``b_c = FᵀC`` (work proportional to the answers times the reviewers of each
    pair, never a Python call per two reviewers: 200 reviewers took 30 s through scikit-learn).
    None where it is undefined: fewer than two pairs, or one answer throughout. Equal to
    ``sklearn.metrics.cohen_kappa_score`` on each two (tests/estimate/test_labels.py).

    >>> import numpy as np, pandas as pd
    >>> labels = pd.Series(["correct", "mismatched", "correct", "correct", "mismatched", "mismatched"])
    >>> pair, reviewer = np.array([0, 1, 2, 0, 1, 2]), np.array([0, 0, 0, 1, 1, 1])
    >>> kappa = pairwise_kappa(pair, reviewer, labels, 3, ["a", "b"])
    >>> {key: round(value, 6) for key, value in kappa.items()}
    {'a / b': 0.4}
    """
    import numpy as np
    from scipy import sparse

    count = len(names)
    firm = label.isin(LABELS[:2]).to_numpy()
    rows, cols = np.asarray(pair)[firm], np.asarray(reviewer)[firm]
    correct = (label.to_numpy()[firm] == LABELS[0]).astype(np.float64)
    f = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(pairs, count))
    c = sparse.csr_matrix((correct, (rows, cols)), shape=(pairs, count))
    if pairs * count <= DENSE_CELLS:  # many reviewers on few pairs: BLAS on the dense matrices
        f, c = f.toarray(), c.toarray()
    n = _dense(f.T @ f)
    n_cc = _dense(c.T @ c)
    a_c = _dense(c.T @ f)  # [a, b]: a's correct answers on the pairs both judged firmly
    b_c = a_c.T
    a_m, b_m = n - a_c, n - b_c
    n_mm = n - a_c - b_c + n_cc
    defined = (n >= 2) & (a_c + b_c > 0) & (a_m + b_m > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_o = (n_cc + n_mm) / n
        p_e = (a_c * b_c + a_m * b_m) / (n * n)
        kappa = (p_o - p_e) / (1 - p_e)
    first, second = np.triu_indices(count, 1)
    return {
        f"{names[a]} / {names[b]}": float(kappa[a, b]) if defined[a, b] else None
        for a, b in zip(first.tolist(), second.tolist())
    }


def _dense(matrix: Any) -> Any:
    return matrix.toarray() if hasattr(matrix, "toarray") else matrix


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


@dataclass(frozen=True)
class KappaSummary:
    """Every two reviewers' κ in a few numbers: how many ``pairs`` of reviewers, how many of them
    have a κ (``defined``), the lowest (``low``) and the ``median`` κ, and the ``worst`` two
    reviewers (``"A / B"``, κ), lowest first."""

    pairs: int
    defined: int
    low: float | None
    median: float | None
    worst: list[tuple[str, float]]

    def text(self) -> str:
        """One line: ``Cohen's κ of 19,900 pairs of reviewers: min 0.12, median 0.80; lowest: …``
        (each name cut and terminal-safe)."""
        undefined = self.pairs - self.defined
        head = f"Cohen's κ of {self.pairs:,} pairs of reviewers"
        if self.low is None or self.median is None:
            return f"{head}: undefined for all (too few pairs judged firmly by both)"
        lowest = ", ".join(f"{shown(key, 2 * NAME_CHARS + 3)} {value:.2f}" for key, value in self.worst)
        return (
            f"{head}: min {self.low:.2f}, median {self.median:.2f} over the {self.defined:,} defined"
            + (f" ({undefined:,} undefined: too few pairs judged by both)" if undefined else "")
            + f"; lowest: {lowest}"
        )


def kappa_summary(kappa: dict[str, float | None], worst: int = KAPPA_WORST) -> KappaSummary:
    """:class:`KappaSummary` of ``kappa`` (:attr:`MergedLabels.kappa`), in linear time: the median
    and the ``worst`` lowest by selection (``numpy.partition``), never a sort of them all."""
    import numpy as np

    keys = [key for key, value in kappa.items() if value is not None]
    values = np.array([kappa[key] for key in keys], dtype=float)
    if not len(values):
        return KappaSummary(len(kappa), 0, None, None, [])
    k = min(worst, len(values))
    lowest = np.argpartition(values, k - 1)[:k]
    lowest = lowest[np.argsort(values[lowest], kind="stable")]
    pairs = [(keys[i], float(values[i])) for i in lowest.tolist()]
    return KappaSummary(len(kappa), len(values), pairs[0][1], float(np.median(values)), pairs)


def answers_text(answers: dict[str, str], separator: str = ": ") -> str:
    """A disagreement's answers as one bounded line: ``a.csv: correct, b.csv: mismatched`` (each
    name cut and terminal-safe; past :data:`~mispair.safe_io.SHOWN_ITEMS` reviewers, counted)."""
    parts = [f"{shown(who, NAME_CHARS)}{separator}{label}" for who, label in answers.items()]
    return listed(parts, chars=NAME_CHARS + 20)

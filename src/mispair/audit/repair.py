"""The repair of an audit's shift runs as decisions: each shifted caption back on its own picture.

A shift run of offset ``k`` (:mod:`mispair.audit.join_findings`) moves the caption found at row
``i`` to the picture at row ``i + k``: a ``replace`` decision for the pair at row ``i + k`` with
that caption. The rows of a run that no caption moves to lost their own caption (a row deleted
above them, the run's first ``k`` rows; or it sat on a row the audit did not read, such as a
refused sample, to or from which no caption moves): ``drop`` decisions, which a person's own
decision on the pair overrides (``keep`` keeps it with the caption it carries). A pair that
carries a repeated caption is never given another row's caption. The decisions go through ``apply``'s own
checks and writers, so a repaired collection is written in the collection's own form, and the
same rows are written beside the audit as ``repair.csv`` for a person to review first
(``mispair apply AUDIT --decisions AUDIT/repair.csv`` is the same as ``--repair``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from mispair.audit.join_findings import JoinFindings
from mispair.errors import ConfigError, DataError
from mispair.safe_io import spreadsheet_safe

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

REPAIR = "repair.csv"


class Repaired(NamedTuple):
    """What the repair decides for one pair: ``decision`` (``replace`` or ``drop``), the
    ``caption`` it gets (the raw caption of pair ``source``; "" for a drop), the ``shift`` it
    comes from (numbered from 1, in ``structure.json``'s order)."""

    decision: str
    caption: str
    shift: int
    source: str


def repaired(findings: JoinFindings, pairs: pd.DataFrame) -> dict[str, Repaired]:
    """The repair's decision of every pair it touches, by pair id: a ``replace`` per move with the
    caption of the pair it comes from (a later run's move onto the same pair wins), then a
    ``drop`` per lost row that no move reaches; ``pairs``: the audit's pairs (``pair_id``,
    ``caption``). :func:`repair_frame` writes it; the review page's "repair" of a run writes the
    rows of that run (:mod:`mispair.audit.page_findings`)."""
    caption = dict(zip(pairs["pair_id"].astype(str), pairs["caption"]))
    rows: dict[str, Repaired] = {}
    for n, shift in enumerate(findings.shifts, 1):
        for source, target in shift.moves:
            rows[target] = Repaired("replace", caption[source], n, source)
    for n, shift in enumerate(findings.shifts, 1):
        for lost in shift.lost:
            rows.setdefault(lost, Repaired("drop", "", n, ""))
    return rows


def repair_frame(findings: JoinFindings, pairs: pd.DataFrame, audit: str = "") -> pd.DataFrame:
    """The repair's decisions (``pair_id``, ``decision``, ``caption``, ``audit_id``, ``reason``):
    :func:`repaired`'s rows, each caption spreadsheet-safe; ``pairs``: the audit's pairs
    (``pair_id``, ``caption``)."""
    import pandas as pd

    def why(row: Repaired) -> str:
        if row.decision == "replace":
            return f"shift {row.shift}: the caption found on pair {row.source}"
        return f"shift {row.shift}: its own caption is lost (kept with --decisions keep)"

    columns = ["pair_id", "decision", "caption", "audit_id", "reason"]
    return pd.DataFrame(
        [
            (pair, row.decision, spreadsheet_safe(row.caption), audit, why(row))
            for pair, row in repaired(findings, pairs).items()
        ],
        columns=columns,
        dtype=str,
    )


def with_repair(
    findings: JoinFindings | None,
    pairs: pd.DataFrame,
    decisions: str | Path | pd.DataFrame | None,
    audit: str | None,
    summary: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """The repair's decisions with a person's ``decisions`` (a file or a frame, checked as
    ``apply`` checks them) over them: a pair the person decided keeps that decision. The
    findings are checked first (:func:`check_findings`, against the audit's ``summary`` where
    given)."""
    import pandas as pd

    from mispair.audit.apply import read_decisions

    if findings is None:
        raise ConfigError(
            "--repair: this audit has no structure.json (audited before shifts were searched); "
            "audit the collection again"
        )
    check_findings(findings, pairs, summary)
    repair = repair_frame(findings, pairs)[["pair_id", "decision", "caption"]]
    own = read_decisions(decisions, audit).assign(caption=lambda f: f["caption"].map(spreadsheet_safe))
    kept = repair[~repair["pair_id"].isin(set(own["pair_id"]))]
    return pd.concat([kept, own], ignore_index=True)


def check_findings(findings: JoinFindings, pairs: pd.DataFrame, summary: Mapping[str, Any] | None) -> None:
    """``structure.json`` checked before a repair follows it (it is untrusted input, as every file
    of an audit folder): every pair it moves or drops is one of the audit's ``pairs``, and, for a
    table or shards whose run config the audit kept (``summary``'s run), every move's target lies
    ``offset`` rows after its source in the same file of the collection's own row order, as the
    audit searched it (:func:`~mispair.audit.join_findings.row_order`). A forged or damaged file
    would otherwise move captions between unrelated pictures.

    Raises:
        DataError: one line naming the first pair that breaks the rule.
    """
    known = set(pairs["pair_id"].astype(str))
    for shift in findings.shifts:
        for pair in [*(i for move in shift.moves for i in move), *shift.lost]:
            if pair not in known:
                raise DataError(
                    f"structure.json names the pair {pair!r}, which the audit does not hold; a "
                    "damaged or tampered audit, audit the collection again"
                )
    place = _row_places(pairs, summary)
    if place is None:
        return
    for n, shift in enumerate(findings.shifts, 1):
        for source, target in shift.moves:
            here, there = place.get(source), place.get(target)
            if here is None or there is None or here[0] != there[0] or there[1] - here[1] != shift.offset:
                raise DataError(
                    f"structure.json: shift {n} moves the caption of pair {source!r} to pair {target!r}, "
                    f"which is not {shift.offset:+d} rows from it in the collection; a damaged or tampered "
                    "audit, audit the collection again"
                )


def _row_places(pairs: pd.DataFrame, summary: Mapping[str, Any] | None) -> dict[str, tuple[int, int]] | None:
    """Each pair's (file, row) in the collection's own row order (rows not read counted), or None
    where the audit's run config is not kept or the collection is not a table (its order is the
    audit's own)."""
    from mispair.audit.audit_folder import read_run_data
    from mispair.audit.join_findings import row_order
    from mispair.config import DataConfig, from_dict
    from mispair.data.readers import reader_of
    from mispair.data.readers.table import TableReader

    data = read_run_data(summary) if summary is not None else None
    if data is None:
        return None
    config = from_dict(data, DataConfig, "the audit's run config: data")
    if not isinstance(reader_of(config), TableReader):
        return None
    ids = pairs["pair_id"].astype(str).tolist()
    order = row_order(ids, pairs["split"].astype(str).to_numpy(), config)
    return {
        ids[index]: (f, k) for f, rows in enumerate(order.files) for k, index in enumerate(rows) if index >= 0
    }

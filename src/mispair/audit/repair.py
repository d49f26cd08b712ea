"""The repair of an audit's shift runs as decisions: each shifted caption back on its own picture.

A shift run of offset ``k`` (:mod:`mispair.audit.join_findings`) moves the caption found at row
``i`` to the picture at row ``i + k``: a ``replace`` decision for the pair at row ``i + k`` with
that caption. The rows of a run that no caption moves to lost their own caption (a row deleted
above them, the run's first ``k`` rows): ``drop`` decisions, which a person's own decision on
the pair overrides (``keep`` keeps it with the caption it carries). A pair that carries a
repeated caption is never given another row's caption. The decisions go through ``apply``'s own
checks and writers, so a repaired collection is written in the collection's own form, and the
same rows are written beside the audit as ``repair.csv`` for a person to review first
(``mispair apply AUDIT --decisions AUDIT/repair.csv`` is the same as ``--repair``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from mispair.audit.join_findings import JoinFindings
from mispair.errors import ConfigError
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
) -> pd.DataFrame:
    """The repair's decisions with a person's ``decisions`` (a file or a frame, checked as
    ``apply`` checks them) over them: a pair the person decided keeps that decision."""
    import pandas as pd

    from mispair.audit.apply import read_decisions

    if findings is None:
        raise ConfigError(
            "--repair: this audit has no structure.json (audited before shifts were searched); "
            "audit the collection again"
        )
    repair = repair_frame(findings, pairs)[["pair_id", "decision", "caption"]]
    own = read_decisions(decisions, audit).assign(caption=lambda f: f["caption"].map(spreadsheet_safe))
    kept = repair[~repair["pair_id"].isin(set(own["pair_id"]))]
    return pd.concat([kept, own], ignore_index=True)

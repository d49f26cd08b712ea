"""Label Studio's JSON export of mispair's tasks (:mod:`mispair.exchange.label_studio_tasks`)
read back as judgements (:mod:`mispair.exchange.judgements`).

The export (Label Studio's "JSON" format) is a list of tasks, each with its ``data`` (mispair's
``pair_id``, ``source``, ``audit_id``) and its ``annotations``: one per annotator, each with
``completed_by`` (a user id, or a user object with ``id`` and ``email`` in newer versions),
``was_cancelled`` (a skipped task) and ``result``, a list of regions whose ``from_name`` names
the control: ``judgement`` (``value.choices``: ``["mismatched"]``) and ``corrected_caption``
(``value.text``: a list of strings). A skipped annotation and one without a choice are not
answers; a task without annotations is not judged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.errors import DataError
from mispair.exchange.label_studio_tasks import CHOICE, CORRECTED
from mispair.limits import limit, raise_hint
from mispair.safe_io import read_input
from mispair.safe_parse import load_json

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class StudioAnswers:
    """The answers of an export: ``judgements`` (``pair_id``, ``reviewer``, ``label``,
    ``caption``), ``sample_pairs`` (the pair ids of answered tasks of the audit's sample),
    ``tasks`` (how many tasks the export holds) and ``skipped`` (annotations cancelled or
    without a choice)."""

    judgements: pd.DataFrame
    sample_pairs: list[str]
    tasks: int
    skipped: int


def read_export(path: str | Path, audit_id: str | None) -> StudioAnswers:
    """The answers in Label Studio's JSON export at ``path`` of tasks of the audit ``audit_id``.
    Refused in one line: a file that is not such an export (JSON-MIN or CSV included: export as
    JSON), a task without a ``pair_id``, a task of another audit."""
    data = read_input(
        path, limit("MAX_TABLE_BYTES"), "a Label Studio export", hint=raise_hint("MAX_TABLE_BYTES")
    )
    tasks = load_json(data, path)
    return parse_export(tasks, audit_id, where=str(path))


def parse_export(tasks: Any, audit_id: str | None, *, where: str = "export") -> StudioAnswers:
    """:func:`read_export` of the export's parsed JSON ``tasks``."""
    import pandas as pd

    if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
        raise DataError(
            f"{where}: not a Label Studio JSON export (a list of tasks); export the project as JSON"
        )
    rows, sample, skipped = [], [], 0
    for number, task in enumerate(tasks, 1):
        pair_id, source = _task_pair(task, number, where, audit_id)
        answered = False
        for annotation in _annotations(task, number, where):
            answer = _answer(annotation)
            if answer is None:
                skipped += 1
                continue
            rows.append((pair_id, _annotator(annotation), *answer))
            answered = True
        if answered and source == "sample":
            sample.append(pair_id)
    judgements = pd.DataFrame(rows, columns=["pair_id", "reviewer", "label", "caption"], dtype=object)
    return StudioAnswers(judgements, sample, len(tasks), skipped)


def _task_pair(task: dict[str, Any], number: int, where: str, audit_id: str | None) -> tuple[str, str]:
    data = task.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("pair_id"), (str, int)):
        hint = " (a JSON-MIN or CSV export: export as JSON)" if CHOICE in task else ""
        raise DataError(f"{where}: task {number} has no data.pair_id; not a task mispair exported{hint}")
    made_for = data.get("audit_id")
    if audit_id and made_for and made_for != audit_id:
        raise DataError(f"{where}: task {number} is of audit {made_for}, not of this audit ({audit_id})")
    return str(data["pair_id"]), str(data.get("source", ""))


def _annotations(task: dict[str, Any], number: int, where: str) -> Iterator[dict[str, Any]]:
    annotations = task.get("annotations", [])
    if not isinstance(annotations, list) or not all(isinstance(a, dict) for a in annotations):
        raise DataError(f"{where}: task {number}: 'annotations' is not a list of annotations")
    yield from annotations


def _answer(annotation: dict[str, Any]) -> tuple[str, str] | None:
    """``(label, corrected caption)`` of one annotation, or None for a skipped one."""
    if annotation.get("was_cancelled"):
        return None
    label, caption = None, ""
    for region in annotation.get("result") or []:
        value = region.get("value") if isinstance(region, dict) else None
        if not isinstance(value, dict):
            continue
        if region.get("from_name") == CHOICE and isinstance(value.get("choices"), list) and value["choices"]:
            label = str(value["choices"][0]).strip().lower()
        elif region.get("from_name") == CORRECTED and isinstance(value.get("text"), list):
            caption = " ".join(str(t) for t in value["text"]).strip()
    return None if label is None else (label, caption)


def _annotator(annotation: dict[str, Any]) -> str:
    """The annotator's name: the user's email where the export has it, else ``user <id>``."""
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        return str(who.get("email") or f"user {who.get('id')}")
    return f"user {who}"

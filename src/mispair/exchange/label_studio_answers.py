"""Label Studio's JSON export of mispair's tasks (:mod:`mispair.exchange.label_studio_tasks`)
read back as judgements (:mod:`mispair.exchange.judgements`).

The export (Label Studio's "JSON" format) is a list of tasks, each with its ``data`` (mispair's
``pair_id``, ``source``, ``audit_id``) and its ``annotations``: one per annotator, each with
``completed_by`` (a user id, or a user object with ``id`` and ``email`` in newer versions),
``was_cancelled`` (a skipped task) and ``result``, a list of regions whose ``from_name`` names
the control: ``judgement`` (``value.choices``: ``["mismatched"]``) and ``corrected_caption``
(``value.text``: a list of strings). A skipped annotation and one without a choice are not
answers; a task without annotations is not judged.

The export is someone else's file: bounded in bytes (``MAX_TABLE_BYTES``) and JSON values
(``MAX_JSON_ELEMENTS``, counted before it is parsed), every field read checked for its type (a
``result`` that is not a list, a choice that is not text: one line naming the task and the
annotation), every id and name bounded (``MAX_ID_CHARS``), every value an error names cut and
terminal-safe.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.errors import DataError
from mispair.exchange.label_studio_tasks import CHOICE, CORRECTED
from mispair.limits import limit, raise_hint
from mispair.safe_io import read_input, shown
from mispair.safe_parse import check_json_elements, load_json

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
    check_json_elements(data, path)
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
        for place, annotation in enumerate(_annotations(task, number, where), 1):
            at = f"{where}: task {number}, annotation {place}"
            answer = _answer(annotation, at)
            if answer is None:
                skipped += 1
                continue
            rows.append((pair_id, _annotator(annotation, at), *answer))
            answered = True
        if answered and source == "sample":
            sample.append(pair_id)
    judgements = pd.DataFrame(rows, columns=["pair_id", "reviewer", "label", "caption"], dtype=object)
    return StudioAnswers(judgements, sample, len(tasks), skipped)


def _task_pair(task: dict[str, Any], number: int, where: str, audit_id: str | None) -> tuple[str, str]:
    data = task.get("data")
    pair_id = data.get("pair_id") if isinstance(data, dict) else None
    if not isinstance(pair_id, (str, int)) or isinstance(pair_id, bool):
        hint = " (a JSON-MIN or CSV export: export as JSON)" if CHOICE in task else ""
        raise DataError(f"{where}: task {number} has no data.pair_id; not a task mispair exported{hint}")
    assert isinstance(data, dict)
    at = f"{where}: task {number}"
    made_for = _text(data, "audit_id", at, "data.audit_id")
    source = _text(data, "source", at, "data.source")
    if audit_id and made_for and made_for != audit_id:
        raise DataError(f"{at} is of audit {shown(made_for, 40)}, not of this audit ({audit_id})")
    return _bounded(str(pair_id), at, "data.pair_id"), source


def _annotations(task: dict[str, Any], number: int, where: str) -> Iterator[dict[str, Any]]:
    annotations = task.get("annotations", [])
    if annotations is None:
        return
    if not isinstance(annotations, list) or not all(isinstance(a, dict) for a in annotations):
        raise DataError(f"{where}: task {number}: 'annotations' is not a list of annotations")
    yield from annotations


def _answer(annotation: dict[str, Any], at: str) -> tuple[str, str] | None:
    """``(label, corrected caption)`` of one annotation, or None for a skipped one (or one
    without a choice); a field of another type than Label Studio writes is refused."""
    cancelled = annotation.get("was_cancelled", False)
    if not isinstance(cancelled, (bool, int)) and cancelled is not None:
        raise DataError(f"{at}: 'was_cancelled' is {_kind(cancelled)}, not true or false")
    if cancelled:
        return None
    regions = annotation.get("result")
    regions = [] if regions is None else regions
    if not isinstance(regions, list):
        raise DataError(f"{at}: 'result' is {_kind(regions)}, not a list of regions")
    label, caption = None, ""
    for k, region in enumerate(regions, 1):
        if not isinstance(region, dict):
            raise DataError(f"{at}: result {k} is {_kind(region)}, not a region (an object)")
        value, name = region.get("value"), _text(region, "from_name", at, f"result {k}: from_name")
        if name not in (CHOICE, CORRECTED):
            continue
        if not isinstance(value, dict):
            raise DataError(f"{at}: result {k} ({name}): 'value' is {_kind(value)}, not an object")
        if name == CHOICE:
            choices = _texts(value.get("choices"), at, f"result {k}: value.choices")
            label = choices[0].strip().lower() if choices else label
        else:
            caption = " ".join(_texts(value.get("text"), at, f"result {k}: value.text")).strip()
    return None if label is None else (label, caption)


def _annotator(annotation: dict[str, Any], at: str) -> str:
    """The annotator's name: the user's email where the export has it, else ``user <id>``."""
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        email = _text(who, "email", at, "completed_by.email")
        number = who.get("id")
        if not _plain_id(number):
            raise DataError(f"{at}: completed_by.id is {_kind(number)}, not a number or text")
        return _bounded(email or f"user {number}", at, "completed_by")
    if not _plain_id(who):
        raise DataError(f"{at}: 'completed_by' is {_kind(who)}, not a user id or a user")
    return _bounded(f"user {who}", at, "completed_by")


def _plain_id(value: object) -> bool:
    return value is None or (isinstance(value, (str, int)) and not isinstance(value, bool))


def _text(mapping: dict[str, Any], key: str, at: str, what: str) -> str:
    """``mapping[key]`` when it is text (missing or null: ""); else refused naming ``what``."""
    value = mapping.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DataError(f"{at}: {what} is {_kind(value)}, not text")
    return value


def _texts(value: object, at: str, what: str) -> list[str]:
    """``value`` as a list of texts (one text alone, or missing: a list of it, or none)."""
    if value is None:
        return []
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(f"{at}: {what} is {_kind(value)}, not a list of texts")
    return value


def _bounded(text: str, at: str, what: str) -> str:
    """``text`` (an id, a name) when it has at most ``MAX_ID_CHARS`` characters."""
    bound = limit("MAX_ID_CHARS")
    if len(text) > bound:
        raise DataError(
            f"{at}: {what} of {len(text):,} characters, more than the {bound:,} an id may have "
            f"({raise_hint('MAX_ID_CHARS')})"
        )
    return text


def _kind(value: object) -> str:
    """What a JSON value is, in words, with the value itself when it is short."""
    names = {
        bool: "true or false",
        int: "a number",
        float: "a number",
        str: "text",
        list: "a list",
        dict: "an object",
    }
    kind = "null" if value is None else names.get(type(value), type(value).__name__)
    return f"{kind} ({shown(repr(value), 40)})" if isinstance(value, (bool, int, float, str)) else kind

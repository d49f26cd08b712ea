"""A Label Studio export as someone careless or malicious writes it: every field of another type
than Label Studio writes is one line naming the task and the annotation (a ``result`` that is a
number was a traceback), the export bounded in JSON values before it is parsed (188 MB of empty
objects was a MemoryError) and in id length (a 10 MB pair id was repeated whole in the error),
and what the import prints bounded and terminal-safe (200 annotators printed 19,905 lines;
annotator names with ESC, BEL, U+202E and a newline forged a ``mispair: error:`` line)."""

import json

import pandas as pd
import pytest

from mispair.cli import main
from tests.exchange.audit_folder import exchange_audit

EVIL = "evil\x1b[2J\x07\u202e\nmispair: error: forged"


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    return exchange_audit(tmp_path_factory.mktemp("hostile"), pairs=12, images=6)


@pytest.fixture(scope="module")
def pairs(audit):
    return pd.read_parquet(audit / "pairs.parquet")["pair_id"].tolist()


def choice(label):
    return {"from_name": "judgement", "to_name": "caption", "type": "choices", "value": {"choices": [label]}}


def task(number, pair, annotations):
    return {"id": number, "data": {"pair_id": pair, "source": "sample"}, "annotations": annotations}


def annotation(who, label):
    return {"id": 1, "completed_by": who, "result": [choice(label)], "was_cancelled": False}


def run(audit, tmp_path, tasks, capsys):
    path = tmp_path / "export.json"
    path.write_text(json.dumps(tasks), encoding="utf-8")
    code = main(
        ["import", str(audit), "--from", "label-studio", str(path), "--out", str(tmp_path / "labels.csv")]
    )
    return code, capsys.readouterr()


def good(pairs):
    return [task(1, pairs[0], [annotation(1, "correct")])]


def edit(path, value):
    """A change setting the field at ``path`` (keys and indices from the export's root)."""

    def change(tasks):
        *parents, last = path
        target = tasks
        for key in parents:
            target = target[key]
        target[last] = value

    return change


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            edit([0, "annotations", 0, "result"], 5),
            "task 1, annotation 1: 'result' is a number (5), not a list of regions",
        ),
        (edit([0, "annotations", 0, "result"], "correct"), "'result' is text ('correct'), not a list"),
        (edit([0, "annotations", 0, "result", 0], 7), "result 1 is a number (7), not a region"),
        (edit([0, "annotations", 0, "result", 0, "value"], []), "result 1 (judgement): 'value' is a list"),
        (
            edit([0, "annotations", 0, "result", 0, "value", "choices"], 3),
            "value.choices is a number (3), not a list of texts",
        ),
        (
            edit([0, "annotations", 0, "result", 0, "value", "choices"], [{"a": 1}]),
            "value.choices is a list, not a list of texts",
        ),
        (
            edit([0, "annotations", 0, "result", 0, "from_name"], 1),
            "result 1: from_name is a number (1), not text",
        ),
        (
            edit([0, "annotations", 0, "was_cancelled"], "no"),
            "'was_cancelled' is text ('no'), not true or false",
        ),
        (
            edit([0, "annotations", 0, "completed_by"], [1]),
            "'completed_by' is a list, not a user id or a user",
        ),
        (
            edit([0, "annotations", 0, "completed_by"], {"id": 1, "email": 5}),
            "completed_by.email is a number (5)",
        ),
        (edit([0, "annotations", 0, "completed_by"], {"id": [1]}), "completed_by.id is a list"),
        (edit([0, "data", "audit_id"], {"x": 1}), "task 1: data.audit_id is an object, not text"),
        (edit([0, "data", "source"], 3), "task 1: data.source is a number (3), not text"),
        (edit([0, "data", "pair_id"], True), "task 1 has no data.pair_id"),
        (edit([0, "annotations", 0, "result", 0, "value", "text"], 4), None),  # not read for a choice
    ],
)
def test_every_field_is_type_checked(audit, pairs, tmp_path, capsys, change, message):
    tasks = good(pairs)
    change(tasks)
    code, printed = run(audit, tmp_path, tasks, capsys)
    if message is None:
        assert code == 0, printed.err
        return
    assert code == 2 and printed.err.count("\n") == 1 and message in printed.err, printed.err
    assert not (tmp_path / "labels.csv").exists()


def test_a_corrected_caption_of_another_type_is_refused(audit, pairs, tmp_path, capsys):
    tasks = good(pairs)
    region = {
        "from_name": "corrected_caption",
        "to_name": "caption",
        "type": "textarea",
        "value": {"text": 9},
    }
    tasks[0]["annotations"][0]["result"].append(region)
    code, printed = run(audit, tmp_path, tasks, capsys)
    assert code == 2 and "result 2: value.text is a number (9), not a list of texts" in printed.err


def test_an_export_of_too_many_values_is_refused_before_it_is_parsed(audit, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_JSON_ELEMENTS", "10000")
    code, printed = run(audit, tmp_path, [{}] * 20_000, capsys)  # the 188 MB, scaled down
    assert code == 2 and "JSON values, more than the 10,000 built at once" in printed.err
    assert "MISPAIR_LIMIT_MAX_JSON_ELEMENTS" in printed.err


def test_a_long_pair_id_is_refused_and_never_repeated(audit, tmp_path, capsys):
    code, printed = run(audit, tmp_path, [task(1, "p" * 10_000_000, [])], capsys)
    assert code == 2 and len(printed.err) < 300
    assert "task 1: data.pair_id of 10,000,000 characters, more than the 4,096" in printed.err


def test_an_unknown_long_pair_is_cut_in_the_error(audit, tmp_path, capsys):
    code, printed = run(audit, tmp_path, [task(1, "p" * 4000, [annotation(1, "correct")])], capsys)
    assert code == 2 and "p" * 200 + "…" in printed.err and len(printed.err) < 500


def test_a_long_annotator_name_is_refused(audit, pairs, tmp_path, capsys):
    code, printed = run(
        audit, tmp_path, [task(1, pairs[0], [annotation({"id": 1, "email": "a" * 5000}, "correct")])], capsys
    )
    assert code == 2 and "completed_by of 5,000 characters" in printed.err


def test_two_hundred_annotators_print_a_bounded_summary(audit, pairs, tmp_path, capsys):
    tasks = [
        task(
            k,
            pair,
            [
                annotation(
                    {"id": a, "email": f"ann{a}@example.org"}, ("correct", "mismatched")[(a + k) % 3 == 0]
                )
                for a in range(200)
            ],
        )
        for k, pair in enumerate(pairs)
    ]
    code, printed = run(audit, tmp_path, tasks, capsys)
    lines = printed.out.splitlines()
    assert code == 0 and len(lines) < 20 and max(map(len, lines)) < 2000, (len(lines), max(map(len, lines)))
    assert "answers by ann0@example.org, " in lines[0] and "and 190 more" in lines[0]
    assert lines[1].startswith("Cohen's κ of 19,900 pairs of reviewers: min ")


def test_annotator_names_are_printed_terminal_safe(audit, pairs, tmp_path, capsys):
    tasks = [
        task(k, pair, [annotation({"id": 1, "email": EVIL}, "correct"), annotation(2, "mismatched")])
        for k, pair in enumerate(pairs[:4])
    ]
    code, printed = run(audit, tmp_path, tasks, capsys)
    assert code == 0, printed.err
    assert not any(ch in printed.out for ch in "\x1b\x07\u202e"), "control characters reach the terminal"
    assert not any(line.startswith("mispair: error:") for line in printed.out.splitlines())
    assert "evil\\x1b[2J\\x07\\u202e\\nmispair: error: f" in printed.out

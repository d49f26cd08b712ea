"""Label Studio without Label Studio: the tasks and config mispair writes, and its JSON export
(written here in the shape Label Studio's "JSON" export has: tasks with ``data`` and
``annotations``, each annotation's ``result`` regions with ``from_name``/``to_name``/``type``/
``value``, ``completed_by`` a user id or, in newer versions, a user object) read back into a
labels file and a decisions file, checked by mispair's own readers of those files."""

import base64
import io
import json
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from mispair.audit.apply import read_decisions
from mispair.cli import main
from mispair.estimate.labels import read_labels
from tests.exchange.audit_folder import audit_id, exchange_audit


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    return exchange_audit(tmp_path_factory.mktemp("ls"), pairs=60, images=20)


def export(audit, out, *extra):
    return main(["export", str(audit), "--to", "label-studio", "--out", str(out), *extra])


def tasks_of(folder):
    return json.loads((folder / "tasks.json").read_text(encoding="utf-8"))


def test_the_sample_then_the_suspects_in_order(audit, tmp_path):
    assert export(audit, tmp_path / "ls", "--sample", "7", "--suspects") == 0
    data = [t["data"] for t in tasks_of(tmp_path / "ls")]
    order = pd.read_csv(audit / "sample.csv", dtype=str)
    pairs = pd.read_parquet(audit / "pairs.parquet").sort_values("rank")
    first = order["pair_id"].tolist()[:7]
    suspects = [p for p in pairs.loc[pairs["suspected"], "pair_id"] if p not in first]
    assert suspects, "the fixture's audit suspects some pairs outside the sample"
    assert [d["pair_id"] for d in data] == first + suspects
    assert [d["source"] for d in data] == ["sample"] * 7 + ["suspects"] * len(suspects)
    assert [d.get("order") for d in data[:7]] == list(range(1, 8))
    captions = dict(zip(pairs["pair_id"], pairs["caption"]))
    assert all(d["caption"] == captions[d["pair_id"]] for d in data)
    assert {d["audit_id"] for d in data} == {audit_id(audit)}
    assert not any("probability" in key for d in data for key in d), "the scores would sway the judge"


def test_an_inline_picture_is_its_own_picture(audit, tmp_path):
    assert export(audit, tmp_path / "ls", "--sample", "3", "--picture-size", "64") == 0
    pairs = pd.read_parquet(audit / "pairs.parquet").set_index("pair_id")
    pictures = audit.parent / "pictures"
    for task in tasks_of(tmp_path / "ls"):
        head, encoded = task["data"]["image"].split(",", 1)
        assert head == "data:image/jpeg;base64"
        shown = np.asarray(Image.open(io.BytesIO(base64.b64decode(encoded))).convert("RGB"), dtype=float)
        assert shown.shape == (64, 64, 3)
        own = pairs.loc[task["data"]["pair_id"], "image_id"]
        distance = {
            path.name: np.abs(
                shown - np.asarray(Image.open(path).convert("RGB").resize((64, 64)), dtype=float)
            ).mean()
            for path in pictures.glob("*.png")
        }
        assert min(distance, key=distance.get) == own


def test_the_config_names_what_the_tasks_hold(audit, tmp_path):
    assert export(audit, tmp_path / "ls", "--sample", "2") == 0
    root = ET.fromstring((tmp_path / "ls" / "config.xml").read_text())
    objects = {e.get("name"): e for e in root.iter() if e.get("value", "").startswith("$")}
    data = tasks_of(tmp_path / "ls")[0]["data"]
    assert {e.get("value")[1:] for e in objects.values()} <= data.keys()
    choices = root.find("Choices")
    assert choices.get("name") == "judgement" and choices.get("toName") in objects
    assert [c.get("value") for c in choices.iter("Choice")] == ["correct", "mismatched", "unsure"]
    area = root.find("TextArea")
    assert area.get("name") == "corrected_caption" and area.get("toName") in objects


def test_local_files_name_the_path_below_the_root(audit, tmp_path):
    root = audit.parent
    assert export(audit, tmp_path / "ls", "--sample", "2", "--local-files", str(root)) == 0
    pairs = pd.read_parquet(audit / "pairs.parquet").set_index("pair_id")
    for task in tasks_of(tmp_path / "ls"):
        image = pairs.loc[task["data"]["pair_id"], "image_id"]
        assert task["data"]["image"] == f"/data/local-files/?d=pictures/{image}"


def test_refusals_are_one_line(audit, tmp_path, capsys):
    (tmp_path / "elsewhere").mkdir()
    assert export(audit, tmp_path / "a", "--sample", "2", "--local-files", str(tmp_path / "elsewhere")) == 2
    assert "is not inside it" in capsys.readouterr().err
    assert export(audit, tmp_path / "b") == 2
    assert "--sample N" in capsys.readouterr().err
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("summary.json", "pairs.parquet"):
        (bare / name).write_bytes((audit / name).read_bytes())
    assert export(bare, tmp_path / "c", "--sample", "2") == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("mispair: error: ") and "no sample.csv" in err and "audit the collection again" in err
    )
    assert not (tmp_path / "c").exists() and not (tmp_path / "a").exists()


# --- the export read back ---------------------------------------------------------------


def choice(label, region="r1"):
    return {
        "id": region,
        "from_name": "judgement",
        "to_name": "caption",
        "type": "choices",
        "origin": "manual",
        "value": {"choices": [label]},
    }


def text(caption, region="r2"):
    return {
        "id": region,
        "from_name": "corrected_caption",
        "to_name": "caption",
        "type": "textarea",
        "origin": "manual",
        "value": {"text": [caption]},
    }


def annotation(number, who, result, *, cancelled=False):
    return {
        "id": number,
        "completed_by": who,
        "result": result,
        "was_cancelled": cancelled,
        "ground_truth": False,
        "created_at": "2026-11-28T10:00:00.000000Z",
        "updated_at": "2026-11-28T10:00:00.000000Z",
        "lead_time": 3.2,
        "task": number,
        "project": 1,
        "prediction": {},
        "result_count": len(result),
        "last_action": None,
    }


def task(number, data, annotations):
    return {
        "id": number,
        "annotations": annotations,
        "drafts": [],
        "predictions": [],
        "data": data,
        "meta": {},
        "created_at": "2026-11-28T09:00:00.000000Z",
        "updated_at": "2026-11-28T10:00:00.000000Z",
        "inner_id": number,
        "total_annotations": len(annotations),
        "cancelled_annotations": sum(a["was_cancelled"] for a in annotations),
        "total_predictions": 0,
        "comment_count": 0,
        "unresolved_comment_count": 0,
        "last_comment_updated_at": None,
        "project": 1,
        "updated_by": None,
        "file_upload": "tasks.json",
        "comment_authors": [],
    }


ANN = {"id": 1, "email": "ann@example.org", "first_name": "", "last_name": ""}
BOB = 2  # older exports give the user's id only
ANSWERS = [  # (pair's place in the sample, Ann's answer, Bob's answer); None: no annotation
    (0, ("correct", ""), ("correct", "")),
    (1, ("mismatched", "a red disc"), ("mismatched", "")),
    (2, ("mismatched", ""), ("mismatched", "")),
    (3, ("correct", ""), ("mismatched", "")),
    (4, ("mismatched", ""), ("correct", "a caption Bob should not have typed")),
    (5, ("unsure", ""), None),
    (6, ("mismatched", "one caption"), ("mismatched", "another caption")),
    (7, ("correct", ""), "skipped"),
    (8, ("mismatched", ""), ("mismatched", "")),
    (9, None, None),
]


def studio_export(audit, tmp_path, tasks_folder):
    """The export of the tasks in ``tasks_folder`` with :data:`ANSWERS`, as Label Studio writes it."""
    data = [t["data"] for t in tasks_of(tasks_folder)]
    tasks = []
    for place, ann, bob in ANSWERS:
        annotations = []
        for k, (who, answer) in enumerate(((ANN, ann), (BOB, bob))):
            if answer == "skipped":
                annotations.append(annotation(100 + place * 2 + k, who, [], cancelled=True))
            elif answer is not None:
                label, caption = answer
                result = [choice(label)] + ([text(caption)] if caption else [])
                annotations.append(annotation(100 + place * 2 + k, who, result))
        tasks.append(task(place + 1, data[place], annotations))
    path = tmp_path / "project-1-at-2026-11-28-10-00-0123abcd.json"
    path.write_text(json.dumps(tasks, indent=2), encoding="utf-8")
    return path, [d["pair_id"] for d in data]


def test_two_annotators_merge_into_labels_and_decisions(audit, tmp_path, capsys):
    assert export(audit, tmp_path / "ls", "--sample", "10") == 0
    path, ids = studio_export(audit, tmp_path, tmp_path / "ls")
    labels, decisions = tmp_path / "labels.csv", tmp_path / "decisions.csv"
    code = main(
        [
            "import",
            str(audit),
            "--from",
            "label-studio",
            str(path),
            "--out",
            str(labels),
            "--decisions",
            str(decisions),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    expected_labels = {  # agreed answers; a disagreement is unsure; one annotator alone counts
        ids[0]: "correct",
        ids[1]: "mismatched",
        ids[2]: "mismatched",
        ids[3]: "unsure",
        ids[4]: "unsure",
        ids[5]: "unsure",
        ids[6]: "mismatched",
        ids[7]: "correct",
        ids[8]: "mismatched",
    }
    read = read_labels(labels, audit=audit_id(audit))
    assert dict(zip(read["pair_id"], read["label"])) == expected_labels
    expected_decisions = {
        ids[0]: ("keep", ""),
        ids[1]: ("replace", "a red disc"),
        ids[2]: ("drop", ""),
        ids[6]: ("drop", ""),  # two different corrections: dropped, listed
        ids[7]: ("keep", ""),
        ids[8]: ("drop", ""),
    }
    got = read_decisions(decisions, audit_id(audit))
    assert {p: (d, c) for p, d, c in got.itertuples(index=False)} == expected_decisions
    # Cohen's kappa by its formula over the 7 pairs both judged correct or mismatched
    both = [
        (a[0], b[0]) for _, a, b in ANSWERS if a and b and b != "skipped" and "unsure" not in (a[0], b[0])
    ]
    assert len(both) == 7
    observed = sum(a == b for a, b in both) / len(both)
    chance = sum(
        (sum(a == v for a, _ in both) / 7) * (sum(b == v for _, b in both) / 7)
        for v in ("correct", "mismatched")
    )
    assert f"Cohen's kappa ann@example.org / user 2: {(observed - chance) / (1 - chance):.2f}" in out
    assert (
        "2 pair(s) judged differently" in out
        and f"  {ids[3]}: ann@example.org correct, user 2 mismatched" in out
    )
    assert f"  {ids[6]}: one caption | another caption" in out
    assert "(1 skipped)" in out


def test_only_the_samples_answers_go_to_the_labels_file(audit, tmp_path):
    assert export(audit, tmp_path / "ls", "--sample", "10", "--suspects") == 0
    path, _ = studio_export(audit, tmp_path, tmp_path / "ls")
    tasks = json.loads(path.read_text())
    suspect = next(t["data"] for t in tasks_of(tmp_path / "ls") if t["data"]["source"] == "suspects")
    tasks.append(task(99, suspect, [annotation(999, ANN, [choice("mismatched")])]))
    path.write_text(json.dumps(tasks))
    labels, decisions = tmp_path / "labels.csv", tmp_path / "decisions.csv"
    args = ["import", str(audit), "--from", "label-studio", str(path), "--out", str(labels)]
    assert main([*args, "--decisions", str(decisions)]) == 0
    assert suspect["pair_id"] not in set(read_labels(labels)["pair_id"])
    assert suspect["pair_id"] in set(read_decisions(decisions, None)["pair_id"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda tasks: tasks[0]["data"].update(audit_id="ffffffffffffffff"), "not of this audit"),
        (lambda tasks: tasks[0]["data"].update(pair_id="nope"), "pair 'nope' is not in this audit"),
        (lambda tasks: tasks[0]["data"].pop("pair_id"), "task 1 has no data.pair_id"),
        (lambda tasks: tasks[0].update(annotations="x"), "not a list of annotations"),
        (lambda tasks: tasks.clear() or tasks.append({"judgement": "correct", "id": 1}), "export as JSON"),
        (lambda tasks: tasks[0]["annotations"][0]["result"][0]["value"].update(choices=["maybe"]), "'maybe'"),
    ],
)
def test_a_wrong_export_is_one_line(audit, tmp_path, capsys, change, message):
    assert export(audit, tmp_path / "ls", "--sample", "10") == 0
    path, _ = studio_export(audit, tmp_path, tmp_path / "ls")
    tasks = json.loads(path.read_text())
    change(tasks)
    path.write_text(json.dumps(tasks))
    labels = tmp_path / "labels.csv"
    assert main(["import", str(audit), "--from", "label-studio", str(path), "--out", str(labels)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mispair: error: ") and message in err and err.count("\n") == 1
    assert not labels.exists()


def test_an_existing_output_is_kept(audit, tmp_path, capsys):
    assert export(audit, tmp_path / "ls", "--sample", "10") == 0
    path, _ = studio_export(audit, tmp_path, tmp_path / "ls")
    labels = tmp_path / "labels.csv"
    labels.write_text("mine\n")
    assert main(["import", str(audit), "--from", "label-studio", str(path), "--out", str(labels)]) == 2
    assert "--overwrite" in capsys.readouterr().err and labels.read_text() == "mine\n"

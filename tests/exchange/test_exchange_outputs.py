"""``mispair export`` and ``mispair import`` keep the output rules every other command keeps
(docs/reliability.md, principles 2 and 11): the export's folder is marked, a folder of someone
else's (their own ``tasks.json`` and ``config.xml``) is refused unless ``--overwrite`` and a
link never; the import's outputs are distinct files, never an input, never a link. Each refusal
is one line, before anything is written."""

import json
import os

import pytest

from mispair.cli import main
from mispair.output_folder import MARKER
from tests.exchange.audit_folder import exchange_audit


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    return exchange_audit(tmp_path_factory.mktemp("outputs"), pairs=12, images=6)


@pytest.fixture(scope="module")
def answers(audit, tmp_path_factory):
    """A Label Studio export answering the audit's first pair."""
    import pandas as pd

    pair = pd.read_parquet(audit / "pairs.parquet")["pair_id"].iloc[0]
    region = {
        "from_name": "judgement",
        "to_name": "caption",
        "type": "choices",
        "value": {"choices": ["correct"]},
    }
    tasks = [
        {
            "id": 1,
            "data": {"pair_id": pair, "source": "sample"},
            "annotations": [{"id": 1, "completed_by": 1, "result": [region]}],
        }
    ]
    path = tmp_path_factory.mktemp("answers") / "export.json"
    path.write_text(json.dumps(tasks))
    return path


def one_line(capsys, argv) -> str:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("mispair: error: ") and err.count("\n") == 1, err
    return err


def export(audit, out, *extra):
    return ["export", audit, "--to", "label-studio", "--sample", "3", "--out", out, *extra]


def test_a_users_tasks_are_never_replaced(audit, tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "tasks.json").write_text("my tasks\n")
    (folder / "config.xml").write_text("my config\n")
    assert "a folder that mispair did not create" in one_line(capsys, export(audit, folder))
    assert {p.name: p.read_text() for p in folder.iterdir()} == {
        "tasks.json": "my tasks\n",
        "config.xml": "my config\n",
    }
    assert main([str(a) for a in export(audit, folder, "--overwrite")]) == 0
    assert json.loads((folder / "tasks.json").read_text())[0]["data"]["source"] == "sample"
    assert (folder / MARKER).is_file()


def test_an_exports_own_folder_is_written_again(audit, tmp_path):
    folder = tmp_path / "ls"
    assert main([str(a) for a in export(audit, folder)]) == 0
    assert (folder / MARKER).read_text() == "mispair export output\n"
    (folder / "notes.txt").write_text("the user's\n")
    assert main([str(a) for a in export(audit, folder)]) == 0
    assert (folder / "notes.txt").read_text() == "the user's\n"


def test_a_link_given_as_out_is_refused(audit, tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert "symbolic link" in one_line(capsys, export(audit, tmp_path / "link"))
    assert not any(real.iterdir())


def test_a_file_given_as_out_is_refused(audit, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert "the output folder is a file" in one_line(capsys, export(audit, tmp_path / "file"))


def test_a_refused_folder_is_refused_before_a_picture_is_read(audit, tmp_path, capsys, monkeypatch):
    import mispair.exchange.label_studio_tasks as tasks

    monkeypatch.setattr(
        tasks, "_data_uri", lambda *a: pytest.fail("a picture read before the folder's check")
    )
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "tasks.json").write_text("my tasks\n")
    one_line(capsys, export(audit, folder))


def imports(audit, export_file, *outputs):
    return ["import", audit, "--from", "label-studio", export_file, *outputs]


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        (["--out", "{t}/a.csv", "--decisions", "{t}/a.csv"], "--decisions {t}/a.csv: the same file as --out"),
        (["--out", "a.csv", "--decisions", "./sub/../a.csv"], "the same file as --out a.csv"),
        (["--out", "{t}/a.csv", "--decisions", "{t}/hard.csv"], "the same file as --out"),
        (["--out", "{export}"], "the same file as the export"),
        (["--out", "{audit}/pairs.csv"], "the same file as the audit's pairs.csv"),
        (["--out", "{t}/link.csv"], "a symbolic link"),
        (["--out", "{t}/folder"], "not a regular file"),
    ],
)
def test_the_outputs_are_distinct_files(audit, answers, tmp_path, capsys, monkeypatch, outputs, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.csv").write_text("mine\n")
    os.link(tmp_path / "a.csv", tmp_path / "hard.csv")
    (tmp_path / "link.csv").symlink_to(tmp_path / "target.csv")
    (tmp_path / "folder").mkdir()
    given = [o.format(t=tmp_path, export=answers, audit=audit) for o in outputs]
    pairs_csv = (audit / "pairs.csv").read_bytes()
    err = one_line(capsys, imports(audit, answers, *given, "--overwrite"))  # refused even so
    assert message.format(t=tmp_path) in err
    assert (tmp_path / "a.csv").read_text() == "mine\n" and not (tmp_path / "target.csv").exists()
    assert (audit / "pairs.csv").read_bytes() == pairs_csv


def test_an_existing_output_needs_overwrite(audit, answers, tmp_path, capsys):
    (tmp_path / "taken.csv").write_text("mine\n")
    err = one_line(capsys, imports(audit, answers, "--out", tmp_path / "taken.csv"))
    assert "exists; give another file name or --overwrite" in err
    assert (tmp_path / "taken.csv").read_text() == "mine\n"


def test_distinct_outputs_are_written(audit, answers, tmp_path):
    labels, decisions = tmp_path / "labels.csv", tmp_path / "decisions.csv"
    assert main([str(a) for a in imports(audit, answers, "--out", labels, "--decisions", decisions)]) == 0
    assert labels.read_text().startswith("pair_id,label") and decisions.read_text().startswith(
        "pair_id,decision"
    )

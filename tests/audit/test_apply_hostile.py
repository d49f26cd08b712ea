"""``mispair apply`` on an audit folder someone else wrote: a traversing id, an absolute id, a
link planted in the collection, a tampered or truncated summary or pairs file, a decisions file
that is not a regular file or is too large: each is one error line, and nothing is written outside
``--out`` (nor ``--out`` itself). A user's folder holding files with apply's generic names is never
replaced or deleted without ``--overwrite``, and even then only apply's files change."""

import json
import os

import pandas as pd
import pytest

from mispair.audit.result import AuditResult, write_parquet
from mispair.audit.summary import AuditSummary
from mispair.cli import main
from mispair.errors import DataError
from tests.cli_errors import one_line_error

N = 6


def fake_audit(base):
    """A collection of ``N`` picture files and an audit folder of it (no training: apply reads
    only ``summary.json`` and ``pairs.parquet``)."""
    collection, audit = base / "collection", base / "audit"
    (collection / "pics").mkdir(parents=True)
    for k in range(N):
        (collection / "pics" / f"{k}.png").write_bytes(b"picture %d" % k)
    pd.DataFrame(
        {"image": [f"pics/{k}.png" for k in range(N)], "caption": [f"caption {k}" for k in range(N)]}
    ).to_csv(collection / "captions.csv", index=False)
    audit.mkdir()
    pairs = pd.DataFrame(
        {
            "pair_id": [str(k) for k in range(N)],
            "image_id": [f"pics/{k}.png" for k in range(N)],
            "caption": [f"caption {k}" for k in range(N)],
            "split": ["train"] * N,
            "mismatch_probability": [0.1 * k for k in range(N)],
            "q_value": [0.1 * k for k in range(N)],
        }
    )
    summary = {
        "collection": str(collection),
        "image_root": str(collection),
        "threshold": 0.5,
        "audit_id": "0123456789abcdef",
        "pairs": N,
        "split_note": None,
        "planted": None,
        "calibration": {"method": "decoys"},
    }
    save(audit, pairs, summary)
    return collection, audit, pairs, summary


def save(audit, pairs, summary):
    with (audit / "pairs.parquet").open("wb") as handle:
        write_parquet(pairs, handle)
    (audit / "summary.json").write_text(json.dumps(summary))


@pytest.fixture
def setup(tmp_path):
    collection, audit, pairs, summary = fake_audit(tmp_path)
    decisions = tmp_path / "decisions.csv"
    pd.DataFrame({"pair_id": ["1"], "decision": ["drop"], "caption": [""]}).to_csv(decisions, index=False)
    return tmp_path, collection, audit, pairs, summary, decisions


def everything(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def apply(audit, decisions, out, *extra):
    return main(["apply", str(audit), "--decisions", str(decisions), "--out", str(out), *extra])


def test_the_fake_audit_applies(setup, capsys):
    tmp, _collection, audit, _, _, decisions = setup
    assert apply(audit, decisions, tmp / "clean") == 0
    written = pd.read_csv(tmp / "clean" / "captions.csv", dtype=str)
    assert len(written) == N - 1 and (tmp / "clean" / "pics" / "0.png").read_bytes() == b"picture 0"
    first_line, listed = (tmp / "clean" / ".mispair-output").read_text().splitlines()
    files = {f.relative_to(tmp / "clean").as_posix() for f in (tmp / "clean").rglob("*") if f.is_file()}
    assert first_line == "mispair apply output" and set(json.loads(listed)) == files - {".mispair-output"}


def tamper_pairs(image_id):
    def change(tmp, collection, audit, pairs, summary):
        pairs = pairs.copy()
        pairs.loc[2, "image_id"] = image_id
        save(audit, pairs, summary)

    return change


def tamper_summary(**fields):
    def change(tmp, collection, audit, pairs, summary):
        save(audit, pairs, {**summary, **fields})

    return change


def raw(name, content):
    def change(tmp, collection, audit, pairs, summary):
        (audit / name).unlink()
        if content == "fifo":
            os.mkfifo(audit / name)
        elif isinstance(content, str):
            os.symlink(content, audit / name)
        else:
            (audit / name).write_bytes(content)

    return change


def plant_link(tmp, collection, audit, pairs, summary):
    (tmp / "secret.txt").write_text("the key")
    (collection / "pics" / "2.png").unlink()
    os.symlink(tmp / "secret.txt", collection / "pics" / "2.png")


def plant_folder_link(tmp, collection, audit, pairs, summary):
    (tmp / "elsewhere").mkdir()
    for k in range(N):
        (tmp / "elsewhere" / f"{k}.png").write_bytes(b"x")
    os.rename(collection / "pics", tmp / "pics-moved")
    os.symlink(tmp / "elsewhere", collection / "pics")


def fifo_picture(tmp, collection, audit, pairs, summary):
    (collection / "pics" / "2.png").unlink()
    os.mkfifo(collection / "pics" / "2.png")


HOSTILE = {
    "a traversing id": (tamper_pairs("../../outside.png"), "not a plain relative name"),
    "a traversing id inside the folder": (tamper_pairs("pics/../../x.png"), "not a plain relative name"),
    "an absolute id": (tamper_pairs("/etc/passwd"), "absolute path outside the collection"),
    "a NUL in an id": (tamper_pairs("pics/a\0b.png"), "not a plain relative name"),
    "a link planted in the collection": (plant_link, "symbolic link"),
    "a folder link planted in the collection": (plant_folder_link, "symbolic link"),
    "a FIFO planted as a picture": (fifo_picture, "not a regular file"),
    "summary: image root is /": (tamper_summary(image_root="/"), "image root"),
    "summary: image root elsewhere": (tamper_summary(image_root="/usr"), "not the audited collection"),
    "summary: threshold as text": (tamper_summary(threshold="0.5"), "'threshold'"),
    "summary: a relative collection": (tamper_summary(collection="x"), "not an absolute path"),
    "summary: pairs counted otherwise": (tamper_summary(pairs=99), "summary.json counts 99"),
    "summary: truncated": (raw("summary.json", b'{"collection": "/x", "thre'), "not valid JSON"),
    "summary: a list": (raw("summary.json", b"[1, 2]"), "not an audit summary"),
    "summary: nested 100,000 deep": (raw("summary.json", b"[" * 100_000 + b"]" * 100_000), "nested"),
    "summary: a link to /dev/zero": (raw("summary.json", "/dev/zero"), "summary.json"),
    "summary: a FIFO": (raw("summary.json", "fifo"), "summary.json"),
    "pairs: truncated": (raw("pairs.parquet", b"PAR1\0\0\0"), "not a readable Parquet"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_audit_folder_is_one_error_line_and_writes_nothing(setup, capsys, case):
    tmp, collection, audit, pairs, summary, decisions = setup
    change, message = HOSTILE[case]
    change(tmp, collection, audit, pairs, summary)
    before = everything(tmp)
    one_line_error(apply(audit, decisions, tmp / "clean"), capsys.readouterr().err, message)
    assert everything(tmp) == before  # nothing outside --out, and no --out
    assert not (tmp.parent / "outside.png").exists()


def test_numeric_pair_ids_and_an_older_summary_are_read(setup, capsys):
    tmp, _collection, audit, pairs, summary, decisions = setup
    older = {k: v for k, v in summary.items() if k not in ("calibration", "pairs", "audit_id")}
    save(audit, pairs.drop(columns="q_value").assign(pair_id=range(N)), older)
    assert apply(audit, decisions, tmp / "clean") == 0


def test_an_absolute_id_inside_the_image_root_is_its_relative_name(setup):
    tmp, collection, _audit, pairs, summary, decisions = setup
    pairs = pairs.assign(image_id=[str(collection / i) for i in pairs["image_id"]])
    applied = AuditResult(pairs, AuditSummary.from_dict(summary), "").apply(decisions, tmp / "clean")
    assert applied.kept == N - 1 and (tmp / "clean" / "pics" / "0.png").is_file()


@pytest.mark.parametrize("kind", ["fifo", "device", "too large"])
def test_a_decisions_file_is_checked_before_it_is_read(setup, capsys, monkeypatch, kind):
    tmp, _collection, audit, _pairs, _summary, decisions = setup
    if kind == "fifo":
        decisions.unlink()
        os.mkfifo(decisions)
    elif kind == "device":
        decisions.unlink()
        os.symlink("/dev/zero", decisions)
    else:
        monkeypatch.setenv("MISPAIR_LIMIT_MAX_DECISIONS_BYTES", "10")
    message = "more than the 10" if kind == "too large" else "not a regular file"
    with pytest.raises(DataError, match=message):
        AuditResult.load(audit).apply(decisions, tmp / "clean")
    assert apply(audit, decisions, tmp / "clean") == 2 and len(capsys.readouterr().err.splitlines()) == 1
    assert not (tmp / "clean").exists()


GENERIC = ("captions.csv", "keep.csv", "removed.csv")


def test_a_users_folder_with_the_generic_names_is_untouched_without_overwrite(setup, capsys):
    tmp, _collection, audit, _pairs, _summary, decisions = setup
    mine = tmp / "mine"
    (mine / "notes").mkdir(parents=True)
    for name in (*GENERIC, "thesis.tex", "notes/a.txt"):
        (mine / name).write_text(f"my {name}")
    before = {p: p.read_text() for p in mine.rglob("*") if p.is_file()}
    one_line_error(apply(audit, decisions, mine), capsys.readouterr().err, "did not create", "--overwrite")
    assert {p: p.read_text() for p in mine.rglob("*") if p.is_file()} == before
    # with overwrite, apply's files are written into it and nothing else is touched
    AuditResult.load(audit).apply(decisions, mine, overwrite=True)
    assert (mine / "thesis.tex").read_text() == "my thesis.tex" and (mine / "notes" / "a.txt").is_file()
    assert len(pd.read_csv(mine / "captions.csv")) == N - 1


def test_applying_twice_refuses_and_overwrite_keeps_what_the_user_added(setup, capsys):
    tmp, _collection, audit, _pairs, _summary, decisions = setup
    assert apply(audit, decisions, tmp / "clean") == 0
    one_line_error(apply(audit, decisions, tmp / "clean"), capsys.readouterr().err, "earlier `mispair apply`")
    (tmp / "clean" / "my-notes.txt").write_text("mine")
    AuditResult.load(audit).apply(decisions, tmp / "clean", overwrite=True)
    assert (tmp / "clean" / "my-notes.txt").read_text() == "mine"
    # a cleaned collection holding only apply's files is replaced whole
    (tmp / "clean" / "my-notes.txt").unlink()
    none = pd.DataFrame(columns=["pair_id", "decision", "caption"])
    applied = AuditResult.load(audit).apply(none, tmp / "clean", overwrite=True)
    assert applied.removed == 0 and len(pd.read_csv(tmp / "clean" / "captions.csv")) == N


def test_a_link_planted_in_the_output_is_never_written_through(setup):
    tmp, _collection, audit, _pairs, _summary, decisions = setup
    (tmp / "victim").mkdir()
    (tmp / "clean").mkdir()
    (tmp / "clean" / "x").write_text("mine")
    os.symlink(tmp / "victim", tmp / "clean" / "pics")
    with pytest.raises(DataError, match="not a folder"):
        AuditResult.load(audit).apply(decisions, tmp / "clean", overwrite=True)
    assert list((tmp / "victim").iterdir()) == []


def test_formulas_in_decisions_downloaded_by_the_report_read_back_as_typed(setup):
    tmp, _collection, audit, _pairs, _summary, decisions = setup
    pd.DataFrame({"pair_id": ["2"], "decision": ["replace"], "caption": ["'=1+1 a dog"]}).to_csv(
        decisions, index=False
    )
    applied = AuditResult.load(audit).apply(decisions, tmp / "clean")
    written = pd.read_csv(applied.folder / "captions.csv", dtype=str).set_index("pair_id")["caption"]
    assert written["2"] == "=1+1 a dog"  # the collection holds the caption as typed


def test_a_tampered_marker_never_removes_a_file_outside_the_cleaned_collection(setup):
    """``--overwrite`` removes the files an earlier apply's marker lists and this apply does not
    write; a marker rewritten to list files above the folder or through a link removes none."""
    tmp, _collection, audit, _, _, decisions = setup
    assert apply(audit, decisions, tmp / "clean") == 0
    (tmp / "victim.txt").write_text("mine")
    (tmp / "elsewhere").mkdir()
    (tmp / "elsewhere" / "inside.txt").write_text("mine")
    os.symlink(tmp / "elsewhere", tmp / "clean" / "link")
    listed = ["../victim.txt", str(tmp / "victim.txt"), "link/inside.txt", "keep.csv"]
    (tmp / "clean" / ".mispair-output").write_text("mispair apply output\n" + json.dumps(listed) + "\n")
    AuditResult.load(audit).apply(decisions, tmp / "clean", overwrite=True)
    assert (tmp / "victim.txt").read_text() == "mine"
    assert (tmp / "elsewhere" / "inside.txt").read_text() == "mine"
    assert len(pd.read_csv(tmp / "clean" / "captions.csv")) == N - 1

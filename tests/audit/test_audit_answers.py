"""``mispair audit --labels``: the answers are checked as ``mispair estimate`` checks them (another
audit's refused in one line before any scorer trains, an answer on no pair of the collection too)
and reach the verdicts: a pair judged correct is never suspected, one judged mismatched always is,
in ``pairs.csv``, the page's data and ``apply`` (``--fdr`` and ``--threshold``); an unsure answer
leaves the pair to the scores; the headline and ``summary.json`` count what the answers fixed."""

import json

import pandas as pd
import pytest

from mispair.audit import audit_collection
from mispair.audit.page_data import FIELDS
from mispair.audit.result import AuditResult
from mispair.audit.summary import AuditSummary
from mispair.cli import main
from mispair.data.synthetic import write_synthetic_dataset
from mispair.errors import DataError
from tests.audit.test_apply import TINY, write_feature_folder

ANSWERS = {"correct": slice(0, 3), "unsure": slice(10, 12), "mismatched": slice(-3, None)}
"""Which pairs of the first audit's ranking are answered how: its most suspect pairs judged
correct, its least suspect judged mismatched (each the opposite of what its scores say)."""


@pytest.fixture(scope="module")
def audits(tmp_path_factory):
    """A collection, its first audit, answers on it (with its ``audit_id``) and the audit again
    with them: ``(collection, first, labels, answered, second)``."""
    base = tmp_path_factory.mktemp("answers")
    precomp = write_synthetic_dataset(base / "toy_precomp", n_train=60, n_dev=20, n_test=20)
    collection = write_feature_folder(base / "collection", precomp)
    first = base / "first"
    audit_collection(collection, first, overrides=TINY, progress=False, log=lambda _: None)
    ranked = pd.read_csv(first / "pairs.csv", dtype=str)["pair_id"].tolist()
    audit = json.loads((first / "summary.json").read_text())["audit_id"]
    answered = {label: ranked[part] for label, part in ANSWERS.items()}
    rows = [(pair_id, label, audit) for label, ids in answered.items() for pair_id in ids]
    labels = base / "labels.csv"
    pd.DataFrame(rows, columns=["pair_id", "label", "audit_id"]).to_csv(labels, index=False)
    second = audit_collection(
        collection, base / "second", overrides=TINY, labels=[labels], progress=False, log=lambda _: None
    )
    return collection, first, labels, answered, second


def by_id(frame):
    return frame.assign(pair_id=frame["pair_id"].astype(str)).set_index("pair_id")


def test_pairs_judged_correct_are_kept_and_judged_mismatched_suspected_in_pairs_csv(audits):
    _, _, _, answered, second = audits
    pairs = by_id(AuditResult.load(_folder(audits)).pairs)  # read back as apply and the page read it
    correct, mismatched, unsure = (pairs.loc[answered[k]] for k in ("correct", "mismatched", "unsure"))
    assert not correct["suspected"].any() and (correct["mismatch_probability"] == 0).all()
    assert (correct["q_value"] == 1).all()
    assert correct["why"].str.startswith("judged correct in your answers").all()
    assert correct["why"].str.contains("the scores alone: ").all()
    assert mismatched["suspected"].all() and (mismatched["mismatch_probability"] == 1).all()
    assert (mismatched["q_value"] == 0).all()
    assert mismatched["why"].str.startswith("judged mismatched in your answers").all()
    assert not unsure["why"].str.startswith("judged").any()  # unsure: the scores decide
    fdr = second.summary.calibration.fdr
    assert (pairs["suspected"] == (pairs["q_value"] <= fdr)).all()  # the cut and the q-values agree
    assert (mismatched["rank"] <= (pairs["mismatch_probability"] == 1).sum()).all()  # ranked first
    parquet = _folder(audits) / "pairs.parquet"
    if parquet.exists():
        table = by_id(pd.read_parquet(parquet))
        assert not table.loc[answered["correct"], "suspected"].any()
        assert table.loc[answered["mismatched"], "suspected"].all()


def test_the_pages_data_holds_the_answered_verdicts(audits):
    _, _, _, answered, _ = audits
    script = (_folder(audits) / "pairs.js").read_text(encoding="utf-8")
    data = json.loads(script.removeprefix("window.mispairAudit = ").removesuffix(";\n"))
    rows = {row[FIELDS.index("pair_id")]: dict(zip(FIELDS, row)) for row in data["rows"]}
    for pair_id in answered["correct"]:
        assert rows[pair_id]["suspected"] is False and rows[pair_id]["mismatch_probability"] == 0
    for pair_id in answered["mismatched"]:
        assert rows[pair_id]["suspected"] is True and rows[pair_id]["mismatch_probability"] == 1


@pytest.mark.parametrize("cut", [["--fdr", "0.1"], ["--fdr", "0.9"], ["--threshold", "0.5"]])
def test_apply_keeps_the_pairs_judged_correct_and_drops_those_judged_mismatched(audits, tmp_path, cut):
    _, _, _, answered, _ = audits
    out = tmp_path / "clean"
    assert main(["apply", str(_folder(audits)), *cut, "--out", str(out)]) in (0, None)
    kept = set(pd.read_csv(out / "keep.csv", dtype=str)["pair_id"])
    removed = set(pd.read_csv(out / "removed.csv", dtype=str)["pair_id"])
    assert set(answered["correct"]) <= kept and not set(answered["correct"]) & removed
    assert set(answered["mismatched"]) <= removed


def test_the_headline_and_the_summary_say_what_the_answers_fixed(audits):
    _, _, labels, _, second = audits
    lines = second.summary.lines(_folder(audits))
    said = [line for line in lines if line.startswith("your answers: ")]  # after any join error's lines
    assert (
        len(said) == 1
        and lines.index(said[0])
        == lines.index(next(line for line in lines if line.startswith("audited"))) + 1
    )
    assert said[0].startswith(
        "your answers: 6 of 8 fixed their pairs' verdicts (--labels): 3 judged correct kept ("
    )
    assert "3 judged mismatched suspected (" in said[0] and said[0].endswith("; 2 unsure left to the scores")
    written = json.loads((_folder(audits) / "summary.json").read_text())
    answers = written["answers"]
    assert (answers["correct"], answers["mismatched"], answers["unsure"]) == (3, 3, 2)
    assert answers["files"] == [str(labels.resolve())]
    assert 0 <= answers["correct_suspected_by_scores"] <= 3 and 0 <= answers["mismatched_kept_by_scores"] <= 3
    assert AuditSummary.from_dict(written).answers == second.summary.answers
    assert written["suspected"] == second.summary.suspected >= 3


def _folder(audits):
    return audits[1].parent / "second"


@pytest.mark.parametrize(
    "rows, message",
    [
        ("{first},correct,0123456789abcdef", "answers given on audit 0123456789abcdef, not on this audit ("),
        ("nowhere/1,correct,", "pair 'nowhere/1' is in no split of this collection"),
    ],
)
def test_another_audits_answers_are_refused_in_one_line_before_any_scorer_trains(
    audits, tmp_path, capsys, rows, message
):
    collection, first, _, answered, _ = audits
    labels = tmp_path / "other.csv"
    labels.write_text("pair_id,label,audit_id\n" + rows.format(first=answered["correct"][0]) + "\n")
    out = tmp_path / "audit"
    code = main(["audit", str(collection), *TINY, "--out", str(out), "--labels", str(labels), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    trained = (
        [p.name for p in (out / "run").rglob("*") if p.suffix in (".pt", ".npz")] if out.exists() else []
    )
    assert not trained and not (out / "pairs.csv").exists()  # refused before any scorer trained
    if "0123" in rows:
        with pytest.raises(DataError) as by_estimate:  # `mispair estimate` on the first audit: the same line
            AuditResult.load(first).estimate(labels)
        assert err[0] == f"mispair: error: {by_estimate.value}"

"""``mispair estimate`` on an audit folder (a synthetic audit, no training): the labels file and
the page's decisions file read alike; answers that are not the first n of the sample's order,
unknown pairs, a pair judged two ways, an empty or unknown-label file and an audit without a
sample are each one error line, nothing written; two reviewers merge with their
disagreements unsure and Cohen's κ as scikit-learn computes it; ``--fdr`` writes every pair's
verdict, which ``apply --decisions`` takes."""

import csv
import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from mispair.audit.result import AuditResult
from mispair.audit.synthetic import synthetic_audit
from mispair.cli import main
from mispair.errors import DataError
from mispair.estimate.audit_estimate import estimate_pairs


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    folder = tmp_path_factory.mktemp("synthetic")
    result = synthetic_audit(folder, pairs=200, images=60, seed=11)
    return folder / "audit", result


def labels(path, rows, header=("pair_id", "label")):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def truth_of(p):
    """A truth the scores know something of: each pair mismatched with its probability."""
    return np.random.default_rng(0).random(len(p)) < p


def judged(result, n, offset=0):
    """The first ``n`` pairs of the sample judged from the truth (mismatched when truly so)."""
    order = result.sample["pair_id"].tolist()
    truth = dict(zip(result.pairs["pair_id"], truth_of(result.pairs["mismatch_probability"].to_numpy())))
    return [(i, "mismatched" if truth[i] else "correct") for i in order[offset : offset + n]]


def refused(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("mispair: error: "), err
    return err[0]


def test_the_estimate_is_printed_and_written(audit, tmp_path, capsys):
    out, result = audit
    path = labels(tmp_path / "labels.csv", judged(result, 60))
    assert main(["estimate", str(out), "--labels", str(path)]) in (0, None)
    printed = capsys.readouterr().out
    assert "your 60 answers" in printed and "valid wherever you stop" in printed
    written = json.loads((out / "estimate.json").read_text())
    expected = AuditResult.load(out).estimate(path)
    assert written["mismatched_share"] == expected.share.estimate.share
    assert (
        written["labels"] == 60 and written["unsure"] == 0 and written["audit_id"] == result.summary.audit_id
    )
    for key in ("mismatched_share_interval", "labels_only_interval", "method", "ranking_auc_interval"):
        assert key in written


def test_the_decisions_file_reads_as_labels(audit, tmp_path):
    out, result = audit
    rows = [(i, "drop" if label == "mismatched" else "keep", "") for i, label in judged(result, 40)]
    decisions = labels(tmp_path / "decisions.csv", rows, header=("pair_id", "decision", "caption"))
    as_labels = labels(tmp_path / "labels.csv", judged(result, 40))
    got, want = AuditResult.load(out).estimate(decisions), AuditResult.load(out).estimate(as_labels)
    assert got.share == want.share


def test_refusals_are_one_line_and_write_nothing(audit, tmp_path, capsys):
    out, result = audit
    (out / "estimate.json").unlink(missing_ok=True)
    first = judged(result, 30)
    skipping = labels(tmp_path / "skip.csv", first[:10] + first[11:])  # the 11th of the order missing
    assert "is not judged" in refused(capsys, ["estimate", str(out), "--labels", str(skipping)])
    top = result.pairs["pair_id"].head(20)  # the most suspect pairs: not a random sample
    ranked = labels(tmp_path / "top.csv", [(i, "mismatched") for i in top])
    if set(top) != set(result.sample["pair_id"].head(20)):
        assert "sample's order" in refused(capsys, ["estimate", str(out), "--labels", str(ranked)])
    unknown = labels(tmp_path / "unknown.csv", [*first[:5], ("no-such-pair", "correct")])
    assert "not in this audit" in refused(capsys, ["estimate", str(out), "--labels", str(unknown)])
    twice = labels(tmp_path / "twice.csv", [*first[:5], (first[0][0], "unsure")])
    assert "judged both" in refused(capsys, ["estimate", str(out), "--labels", str(twice)])
    (tmp_path / "empty.csv").write_text("")
    assert "empty" in refused(capsys, ["estimate", str(out), "--labels", str(tmp_path / "empty.csv")])
    header = labels(tmp_path / "header.csv", [])
    assert "no answer" in refused(capsys, ["estimate", str(out), "--labels", str(header)])
    odd = labels(tmp_path / "odd.csv", [(first[0][0], "wrong")])
    assert "a label is one of" in refused(capsys, ["estimate", str(out), "--labels", str(odd)])
    other = labels(
        tmp_path / "other.csv",
        [(i, lab, "0123456789abcdef") for i, lab in first[:5]],
        ("pair_id", "label", "audit_id"),
    )
    assert "not on this audit" in refused(capsys, ["estimate", str(out), "--labels", str(other)])
    assert "--fdr" in refused(capsys, ["estimate", str(out), "--labels", str(skipping), "--fdr", "1.5"])
    assert not (out / "estimate.json").exists()


def test_an_audit_without_a_sample_says_how_to_get_one(audit, tmp_path, capsys):
    out, result = audit
    older = tmp_path / "older"
    older.mkdir()
    for name in ("summary.json", "pairs.parquet", "pairs.csv"):
        (older / name).write_bytes((out / name).read_bytes())
    path = labels(tmp_path / "labels.csv", judged(result, 10))
    assert "audit the collection again" in refused(capsys, ["estimate", str(older), "--labels", str(path)])


def test_two_reviewers_merge_with_disagreements_unsure_and_kappa(audit, tmp_path, capsys):
    out, result = audit
    first = judged(result, 50)
    flipped = {3, 8, 21}
    second = [
        (i, ({"correct": "mismatched", "mismatched": "correct"}[lab] if k in flipped else lab))
        for k, (i, lab) in enumerate(first)
    ]
    a, b = labels(tmp_path / "a.csv", first), labels(tmp_path / "b.csv", second)
    assert main(["estimate", str(out), "--labels", str(a), str(b)]) in (0, None)
    printed = capsys.readouterr().out
    for k in flipped:
        assert f"    {first[k][0]}: a.csv: {first[k][1]}, b.csv: {second[k][1]}" in printed
    written = json.loads((out / "estimate.json").read_text())
    assert sorted(row["pair_id"] for row in written["disagreed_pairs"]) == sorted(
        first[k][0] for k in flipped
    )
    assert (
        written["unsure"] == 3
        and written["disagreements"] == 3
        and written["reviewers"] == ["a.csv", "b.csv"]
    )
    kappa = cohen_kappa_score([lab for _, lab in first], [lab for _, lab in second])
    assert written["kappa"]["a.csv / b.csv"] == pytest.approx(kappa)


def test_the_labelled_drop_lists_every_pair_and_apply_takes_it(audit, tmp_path, capsys):
    out, result = audit
    path = labels(tmp_path / "labels.csv", judged(result, 120))
    assert main(["estimate", str(out), "--labels", str(path), "--fdr", "0.1"]) in (0, None)
    assert "at a false-discovery rate of 0.1" in capsys.readouterr().out
    verdicts = pd.read_csv(out / "estimate_pairs.csv", dtype={"pair_id": str})
    assert sorted(verdicts["pair_id"]) == sorted(result.pairs["pair_id"])
    assert set(verdicts.columns) >= {"pair_id", "mismatch_probability", "suspected", "label"}
    assert verdicts["mismatch_probability"].between(0, 1).all()
    judged_mismatched = {i for i, lab in judged(result, 120) if lab == "mismatched"}
    assert judged_mismatched <= set(verdicts.loc[verdicts["suspected"], "pair_id"])
    clean = tmp_path / "clean"
    assert main(["apply", str(out), "--decisions", str(out / "estimate_pairs.csv"), "--out", str(clean)]) in (
        0,
        None,
    )
    with open(clean / "captions.csv", newline="", encoding="utf-8") as f:
        kept = {r["pair_id"] for r in csv.DictReader(f)}
    assert kept == set(verdicts.loc[~verdicts["suspected"], "pair_id"])
    assert np.isfinite(json.loads((out / "estimate.json").read_text())["drop"]["kept_mismatched_share"])
    assert set(verdicts["audit_id"]) == {result.summary.audit_id}  # apply takes it for this audit only
    other = tmp_path / "other.csv"
    verdicts.assign(audit_id="0123456789abcdef").to_csv(other, index=False)
    assert "0123456789abcdef" in refused(
        capsys, ["apply", str(out), "--decisions", str(other), "--out", str(tmp_path / "x")]
    )
    assert main(["estimate", str(out), "--labels", str(path)]) in (0, None)  # no drop this time
    assert not (out / "estimate_pairs.csv").exists()  # the earlier drop's list is gone with it


def test_a_damaged_audit_folder_is_one_line(audit, tmp_path, capsys):
    out, result = audit
    path = labels(tmp_path / "labels.csv", judged(result, 10))
    for name, damage in (
        ("twice", lambda f: pd.concat([f, f.head(1)])),
        ("words", lambda f: f.assign(mismatch_probability="high")),
        ("beyond", lambda f: f.assign(mismatch_probability=2.0)),
    ):
        copy = tmp_path / name
        copy.mkdir()
        for file in ("summary.json", "sample.csv"):
            (copy / file).write_bytes((out / file).read_bytes())
        damage(pd.read_parquet(out / "pairs.parquet")).to_parquet(copy / "pairs.parquet")
        message = refused(capsys, ["estimate", str(copy), "--labels", str(path)])
        assert "pairs.parquet" in message
    broken = tmp_path / "broken"
    broken.mkdir()
    for file in ("summary.json", "pairs.parquet"):
        (broken / file).write_bytes((out / file).read_bytes())
    (broken / "sample.csv").write_text("pair_id,order\nx,1\nx,3\n")
    assert "damaged" in refused(capsys, ["estimate", str(broken), "--labels", str(path)])
    lost = tmp_path / "lost"  # a judged pair of the sample missing from the audit's pairs
    lost.mkdir()
    for file in ("summary.json", "sample.csv"):
        (lost / file).write_bytes((out / file).read_bytes())
    first = result.sample["pair_id"].iloc[0]
    pairs = pd.read_parquet(out / "pairs.parquet")
    pairs[pairs["pair_id"].astype(str) != first].to_parquet(lost / "pairs.parquet")
    assert "pairs.parquet" in refused(capsys, ["estimate", str(lost), "--labels", str(path)])
    with pytest.raises(DataError, match="not one of the audit's pairs"):  # the same, from Python
        estimate_pairs(
            pairs[pairs["pair_id"].astype(str) != first],
            result.sample,
            [path],
            audit=result.summary.audit_id or "",
        )
    assert "not a finished audit folder" in refused(
        capsys, ["estimate", str(tmp_path), "--labels", str(path)]
    )


def test_a_rewritten_sample_is_refused_in_one_line(audit, tmp_path, capsys):
    """The forgery of issue 64: sample.csv rewritten so that the correct pairs come first, then
    every pair answered truthfully, read "0.0% (0–10%)"; the order is drawn again from the
    recorded seed and the audit's id and compared, so any edit of it is refused."""
    out, result = audit
    forged = tmp_path / "forged"
    forged.mkdir()
    for name in ("summary.json", "pairs.parquet", "pairs.csv"):
        (forged / name).write_bytes((out / name).read_bytes())
    sample = pd.read_csv(out / "sample.csv", dtype=str)
    p = result.pairs.set_index("pair_id")["mismatch_probability"]
    reordered = sample.assign(key=sample["pair_id"].map(p)).sort_values("key", kind="stable")
    reordered = reordered.assign(order=range(1, len(sample) + 1)).drop(columns="key")
    reordered.to_csv(forged / "sample.csv", index=False)
    answers = labels(tmp_path / "forged.csv", [(i, "correct") for i in reordered["pair_id"].head(40)])
    command = ["estimate", str(forged), "--labels", str(answers)]
    assert "not the order this audit drew" in refused(capsys, command)
    sample.assign(stratum="all").to_csv(forged / "sample.csv", index=False)  # claimed uniform: drawn so
    assert "not the order this audit drew" in refused(capsys, command)
    summary = json.loads((out / "summary.json").read_text())
    summary["sample"]["seed"] += 1  # another seed recorded: the file no longer matches it
    (forged / "summary.json").write_text(json.dumps(summary))
    sample.to_csv(forged / "sample.csv", index=False)
    assert "not the order this audit drew" in refused(capsys, command)
    assert not (forged / "estimate.json").exists()


def test_two_collections_with_the_same_pair_ids_and_seed_get_different_orders():
    from mispair.estimate.sample import sample_order

    ids = [f"train/{k}" for k in range(300)]
    p = np.linspace(0, 1, 300)
    one = sample_order(ids, 0, p, p > 0.9, audit="0123456789abcdef")["pair_id"].tolist()
    again = sample_order(ids, 0, p, p > 0.9, audit="0123456789abcdef")["pair_id"].tolist()
    other = sample_order(ids, 0, p, p > 0.9, audit="fedcba9876543210")["pair_id"].tolist()
    assert one == again and one != other

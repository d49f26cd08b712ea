"""``mispair apply``: an audit, decisions on some of its pairs, and the cleaned collection holds
exactly the kept and replaced pairs (images hard-linked, the input untouched); every bad input is a
one-line error that writes nothing."""

import hashlib
import json
import os
import shutil
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from mispair.audit import audit_collection
from mispair.audit.result import AuditResult, audit_id
from mispair.cli import main
from mispair.config import DataConfig
from mispair.data.precomp import read_precomp
from mispair.data.readers import reader_of
from mispair.data.synthetic import write_synthetic_dataset
from mispair.errors import ConfigError, DataError

TINY = [
    "model.text_encoder=bigru",
    "model.image_pooling=fragments",
    "model.embed_dim=32",
    "model.word_dim=16",
    "train.epochs=1",
    "train.batch_size=16",
    "train.lr_decay_epochs=[]",
    "train.threads=1",
    "division.folds=2",
    "division.epochs=2",
    "division.rounds=1",
    "division.repeats=1",
]


def write_feature_folder(folder, precomp):
    """The synthetic precomputed collection as a folder of ``.npy`` image files with a
    ``captions.csv`` (image, caption, split): a collection of files that needs no picture model."""
    rows = []
    for split in ("train", "dev", "test"):
        pairs = read_precomp(precomp, split)
        (folder / "feats" / split).mkdir(parents=True)
        for i, features in enumerate(pairs.images):
            np.save(folder / "feats" / split / f"{i:03d}.npy", features)
        rows += [
            {"image": f"feats/{split}/{i:03d}.npy", "caption": caption, "split": split}
            for caption, i in zip(pairs.captions, pairs.image_of_caption)
        ]
    copy = rows[0]  # a test pair that repeats the first training pair: a copied picture, its caption
    (folder / "feats" / "test" / "copy.npy").write_bytes((folder / copy["image"]).read_bytes())
    rows.append({"image": "feats/test/copy.npy", "caption": copy["caption"], "split": "test"})
    pd.DataFrame(rows).to_csv(folder / "captions.csv", index=False)
    return folder


def snapshot(folder):
    """Every file under ``folder`` with its content digest (what must not change)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".mispair_cache" not in p.parts
    }


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    base = tmp_path_factory.mktemp("apply")
    precomp = write_synthetic_dataset(base / "toy_precomp", n_train=60, n_dev=20, n_test=20)
    collection = write_feature_folder(base / "collection", precomp)
    result = audit_collection(collection, base / "audit", overrides=TINY, progress=False, log=lambda _: None)
    return collection, base / "audit", result


def some_decisions(pairs: pd.DataFrame) -> pd.DataFrame:
    ids = pairs["pair_id"].tolist()
    return pd.DataFrame(
        {
            "pair_id": ids[:6],
            "decision": ["drop", "drop", "replace", "keep", "replace", "drop"],
            "caption": ["", "", "a new caption", "", "another new caption", ""],
        }
    )


def test_the_cleaned_collection_holds_exactly_the_kept_and_replaced_pairs(audited, tmp_path):
    collection, audit_dir, result = audited
    before = snapshot(collection)
    decisions = some_decisions(result.pairs)
    path = tmp_path / f"decisions-{result.summary['audit_id']}.csv"
    decisions.to_csv(path, index=False)
    out = tmp_path / "clean"
    assert main(["apply", str(audit_dir), "--decisions", str(path), "--out", str(out)]) == 0
    written = pd.read_csv(out / "captions.csv", dtype=str, keep_default_na=False)
    source = pd.read_csv(collection / "captions.csv", dtype=str, keep_default_na=False)
    source["pair_id"] = [str(k) for k in range(len(source))]
    dropped = set(decisions.loc[decisions["decision"] == "drop", "pair_id"])
    new = dict(zip(decisions["pair_id"], decisions["caption"]))
    expected = source[~source["pair_id"].isin(dropped)].assign(
        caption=lambda f: [new[i] if new.get(i) else c for i, c in zip(f["pair_id"], f["caption"])]
    )
    assert list(written.columns) == ["image", "caption", "split"]  # the input's columns, none added
    assert written.to_dict("records") == expected[["image", "caption", "split"]].to_dict("records")
    for image in set(written["image"]):  # hard links of the input's files, at the same relative paths
        assert os.path.samefile(out / image, collection / image)
    assert snapshot(collection) == before
    keep, removed = pd.read_csv(out / "keep.csv", dtype=str), pd.read_csv(out / "removed.csv", dtype=str)
    assert set(removed["pair_id"]) == dropped and set(removed["reason"]) == {"drop"}
    assert keep["pair_id"].tolist() == expected["pair_id"].tolist()  # in the rows' order
    reasons = dict(zip(keep["pair_id"], keep["reason"]))
    assert {reasons[i] for i in decisions["pair_id"] if i not in dropped} == {"keep", "replace"}
    assert {reasons[i] for i in set(expected["pair_id"]) - set(decisions["pair_id"])} == {"undecided"}
    read = reader_of(DataConfig(source="folder", root=str(out)))  # what audit and train read
    data = DataConfig(source="folder", root=str(out))
    pairs = [read.read_split(data, s) for s in ("train", "dev", "test")]
    assert sum(len(p.captions) for p in pairs) == len(expected)
    assert {i for p in pairs for i in p.pair_ids} == {str(k) for k in range(len(expected))}  # renumbered


def test_a_copied_training_pair_in_the_test_split_is_a_duplicate_and_a_leak(audited):
    _, _, result = audited
    pairs = result.pairs
    copy = pairs[pairs["image_id"] == "feats/test/copy.npy"].iloc[0]
    original = pairs[pairs["image_id"] == "feats/train/000.npy"]
    assert copy["leak"] and copy["duplicate_image_of"] == "feats/train/000.npy"
    assert (original["duplicate_image_of"] == "feats/test/copy.npy").all() and not original["leak"].any()
    assert copy["same_caption_images"] >= 1 and "repeats a training pair" in copy["why"]
    assert (original.loc[original["caption"] == copy["caption"], "same_caption_images"] >= 1).all()
    assert result.summary["duplicates"]["leaks"] == int(result.pairs["leak"].sum()) >= 1


def test_undecided_pairs_over_the_threshold_are_removed(audited, tmp_path):
    _, _, result = audited
    pairs, threshold = result.pairs, float(result.pairs["mismatch_probability"].median())
    decisions = some_decisions(pairs)
    applied = result.apply(decisions, tmp_path / "clean", threshold=threshold)
    removed = pd.read_csv(applied.folder / "removed.csv", dtype=str)
    undecided = pairs[~pairs["pair_id"].isin(decisions["pair_id"])]
    over = set(undecided.loc[undecided["mismatch_probability"] >= threshold, "pair_id"])
    assert set(removed.loc[removed["reason"] == f"mismatch probability >= {threshold:g}", "pair_id"]) == over
    assert applied.removed == len(over) + 3 and applied.kept == len(pairs) - applied.removed
    assert applied.replaced == 2 and applied.linked + applied.copied > 0


def test_the_audit_id_is_the_digest_of_the_pairs_not_of_their_order(audited):
    _, _, result = audited
    assert result.summary["audit_id"] == audit_id(result.pairs) == audit_id(result.pairs.iloc[::-1])
    changed = result.pairs.copy()
    changed.loc[changed.index[0], "caption"] += "!"
    assert audit_id(changed) != result.summary["audit_id"]
    assert AuditResult.load(audited[1]).summary["audit_id"] == result.summary["audit_id"]


BAD = {
    "unknown pair id": (
        lambda d: d.assign(pair_id=d["pair_id"].where(d.index > 0, "no-such-pair")),
        "not in this audit",
    ),
    "unknown decision": (lambda d: d.assign(decision=d["decision"].where(d.index > 0, "maybe")), "'maybe'"),
    "empty replacement": (lambda d: d.assign(caption=""), "empty caption"),
    "another audit's ids": (lambda d: d.assign(pair_id=[f"x{k}" for k in range(len(d))]), "another audit"),
    "a pair twice": (lambda d: pd.concat([d, d.head(1)]), "more than one decision"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_decisions_are_one_line_errors_that_write_nothing(audited, tmp_path, capsys, case):
    _, audit_dir, result = audited
    change, message = BAD[case]
    path = tmp_path / "decisions.csv"
    change(some_decisions(result.pairs)).to_csv(path, index=False)
    assert main(["apply", str(audit_dir), "--decisions", str(path), "--out", str(tmp_path / "clean")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("mispair: error: ") and error.count("\n") == 1 and message in error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decisions.csv"]


def test_bad_places_are_one_line_errors_that_write_nothing(audited, tmp_path, capsys):
    collection, audit_dir, result = audited
    good = tmp_path / "decisions.csv"
    some_decisions(result.pairs).to_csv(good, index=False)
    other = tmp_path / "decisions-0123456789abcdef.csv"
    some_decisions(result.pairs).to_csv(other, index=False)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    before = snapshot(collection), snapshot(audit_dir)
    cases = [
        ([str(audit_dir), "--decisions", str(other), "--out", str(tmp_path / "a")], "not of this audit"),
        (
            [str(audit_dir), "--decisions", str(good), "--out", str(busy)],
            "did not create",
        ),
        ([str(audit_dir), "--decisions", str(good), "--out", str(collection / "clean")], "inside the input"),
        ([str(audit_dir), "--decisions", str(good), "--out", str(audit_dir / "clean")], "inside the input"),
        (
            [str(tmp_path / "no-audit"), "--decisions", str(good), "--out", str(tmp_path / "b")],
            "not a finished audit",
        ),
        (
            [str(audit_dir), "--decisions", str(tmp_path / "none.csv"), "--out", str(tmp_path / "c")],
            "no such file",
        ),
    ]
    for argv, message in cases:
        assert main(["apply", *argv]) == 2
        error = capsys.readouterr().err
        assert error.startswith("mispair: error: ") and error.count("\n") == 1 and message in error, argv
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", other.name, "decisions.csv"]
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    assert (snapshot(collection), snapshot(audit_dir)) == before


def test_a_previous_cleaned_collection_is_replaced_only_with_overwrite(audited, tmp_path):
    _, _, result = audited
    first = result.apply(some_decisions(result.pairs), tmp_path / "clean")
    with pytest.raises(DataError, match="earlier `mispair apply`"):
        result.apply(some_decisions(result.pairs).head(1), tmp_path / "clean")
    again = result.apply(some_decisions(result.pairs).head(1), tmp_path / "clean", overwrite=True)
    assert again.folder == first.folder and again.removed == 1
    clean = tmp_path / "clean"
    first_line, listed = (clean / ".mispair-output").read_text().splitlines()
    files = {f.relative_to(clean).as_posix() for f in clean.rglob("*") if f.is_file()}
    assert first_line == "mispair apply output" and set(json.loads(listed)) == files - {".mispair-output"}


def test_a_collection_without_image_files_is_refused(audited, tmp_path):
    _, _, result = audited
    summary = replace(result.summary, image_root=None)
    with pytest.raises(DataError, match="no image file"):
        AuditResult(result.pairs, summary, "").apply(some_decisions(result.pairs), tmp_path / "clean")
    assert not (tmp_path / "clean").exists()


@pytest.mark.slow  # a second audit
def test_the_cleaned_collection_is_audited_as_it_is(audited, tmp_path):
    _, _, result = audited
    decisions = some_decisions(result.pairs)
    applied = result.apply(decisions, tmp_path / "clean")
    again = audit_collection(
        applied.folder, tmp_path / "again", overrides=TINY, progress=False, log=lambda _: None
    )
    dropped = set(decisions.loc[decisions["decision"] == "drop", "pair_id"])
    kept = pd.read_csv(applied.folder / "keep.csv", dtype=str)["pair_id"].tolist()  # the rows' order
    assert set(kept) == set(result.pairs["pair_id"]) - dropped
    assert sorted(again.pairs["pair_id"], key=int) == [str(k) for k in range(len(kept))]  # as a table's
    caption = again.pairs.set_index("pair_id")["caption"]
    assert caption[str(kept.index(decisions["pair_id"][2]))] == "a new caption"
    assert again.summary["pairs_refused"] == 0 and again.summary["pairs_by_split"].keys() == {
        "train",
        "dev",
        "test",
    }


def test_a_planted_swap_is_undone_in_the_cleaned_collection(audited, tmp_path):
    _, _, result = audited
    pairs = result.pairs.copy()
    swapped = pairs.index[:2]
    pairs["true_image_id"] = pairs["image_id"]
    pairs.loc[swapped, "image_id"] = pairs.loc[swapped[::-1], "image_id"].to_numpy()  # as an audit plants
    none = pd.DataFrame(columns=["pair_id", "decision", "caption"])
    planted = AuditResult(pairs, replace(result.summary, planted=0.4), "")
    applied = planted.apply(none, tmp_path / "a", format="folder")  # the pairs from the audit
    written = pd.read_csv(applied.folder / "captions.csv", dtype=str).set_index("pair_id")["image"]
    assert written.to_dict() == dict(zip(pairs["pair_id"], pairs["true_image_id"]))
    applied = planted.apply(none, tmp_path / "b")  # the folder's own rows, read again
    written = pd.read_csv(applied.folder / "captions.csv", dtype=str)["image"]
    assert dict(zip(map(str, written.index), written)) == dict(zip(pairs["pair_id"], pairs["true_image_id"]))


def test_images_are_copied_where_they_cannot_be_linked(audited, tmp_path, monkeypatch):
    collection, _, result = audited

    def no_links(source, target, **_):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_links)
    applied = result.apply(some_decisions(result.pairs), tmp_path / "clean")
    images = set(pd.read_csv(applied.folder / "captions.csv", dtype=str)["image"])
    assert applied.linked == 0 and applied.copied == len(images)
    for image in images:
        assert not os.path.samefile(applied.folder / image, collection / image)
        assert (applied.folder / image).read_bytes() == (collection / image).read_bytes()


@pytest.mark.parametrize("threshold", [-0.1, 1.5])
def test_a_threshold_outside_zero_to_one_is_refused(audited, tmp_path, threshold):
    _, _, result = audited
    with pytest.raises(ConfigError, match="--threshold"):
        result.apply(some_decisions(result.pairs), tmp_path / "clean", threshold=threshold)
    assert not (tmp_path / "clean").exists()


def test_undecided_pairs_of_the_fdr_cut_are_removed_and_the_cut_is_the_audits_suspects(audited, tmp_path):
    _, _, result = audited
    pairs = result.pairs
    assert result.summary["calibration"]["method"] == "decoys" and pairs["q_value"].notna().all()
    assert (pairs["suspected"] == (pairs["q_value"] <= result.summary["calibration"]["fdr"])).all()
    decisions = some_decisions(pairs)
    applied = result.apply(decisions, tmp_path / "clean", fdr=0.2)
    removed = pd.read_csv(applied.folder / "removed.csv", dtype=str)
    undecided = pairs[~pairs["pair_id"].isin(decisions["pair_id"])]
    cut = set(undecided.loc[undecided["q_value"] <= 0.2, "pair_id"])
    assert set(removed.loc[removed["reason"] == "q-value <= 0.2", "pair_id"]) == cut
    for wrong, message in ((1.5, "--fdr"), (0.0, "--fdr")):
        with pytest.raises(ConfigError, match=message):
            result.apply(decisions, tmp_path / "other", fdr=wrong)
    with pytest.raises(ConfigError, match="give one of them"):
        result.apply(decisions, tmp_path / "other", fdr=0.1, threshold=0.5)
    assert not (tmp_path / "other").exists()


def test_apply_says_the_rows_the_audit_refused_are_not_in_the_cleaned_collection(audited, tmp_path, capsys):
    """A row the audit refused (an empty caption cell, a picture it cannot read) is not written:
    apply's last line says how many and where they are listed, not only the docs."""
    _, audit_dir, result = audited
    audit = tmp_path / "audit"
    shutil.copytree(audit_dir, audit)
    refused = pd.DataFrame({"pair_id": ["97", "98"], "image": ["a.png", "b.png"], "caption": ["", ""]})
    refused.assign(reason="empty caption").to_csv(audit / "refused.csv", index=False)
    assert main(["apply", str(audit), "--fdr", "0.1", "--out", str(tmp_path / "clean")]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.endswith(f"; the 2 row(s) the audit refused are not in it ({audit / 'refused.csv'})")
    written = pd.read_csv(tmp_path / "clean" / "captions.csv", dtype=str, keep_default_na=False)
    assert len(written) == len(result.pairs) - int(result.pairs["suspected"].sum())

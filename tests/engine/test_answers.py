"""A person's answers in the held-out scoring (``division.answers``): every out-of-fold scorer
trains on the pairs judged correct outside the folds it holds out, whatever the round trusted,
and on no pair judged mismatched — in plain rounds and down nested trust's lattice; the cached
scores follow the answers' content; an answer on no pair of the collection is one error line;
``mispair audit --labels`` fixes them and prints their estimate."""

import csv
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from mispair.audit.result import AuditResult, audit_id
from mispair.cli import main
from mispair.data.synthetic import write_synthetic_dataset
from mispair.engine.held_out import (
    HeldOutPlan,
    HeldOutScoring,
    RoundStart,
    Runtime,
    division_scores,
    out_of_fold_scores,
)
from mispair.engine.held_out.answers import judged_pairs, with_answers
from mispair.engine.held_out.audit_rows import AuditRows
from mispair.engine.held_out.rounds import refined_out_of_fold_scores
from mispair.errors import DataError
from mispair.estimate.labels import read_labels
from tests.engine.test_division_scores import _setup


def judgements(n, seed=0):
    rng = np.random.default_rng(seed)
    judged = np.full(n, np.nan)
    picked = rng.choice(n, n // 3, replace=False)
    judged[picked] = (rng.random(len(picked)) < 0.4).astype(float)  # 1 mismatched, 0 correct
    return judged


def test_with_answers_is_its_rule_pair_by_pair():
    rng = np.random.default_rng(1)
    training, held_out = rng.random(200) < 0.5, rng.random(200) < 0.3
    judged = judgements(200)
    got = with_answers(training & ~held_out, held_out, judged)
    for k in range(200):
        expected = (training[k] and not held_out[k] and judged[k] != 1) or (
            judged[k] == 0 and not held_out[k]
        )
        assert got[k] == expected
    assert with_answers(training, held_out, None) is training


def record_into(seen):
    def record(trainer):
        seen.append(set(trainer.recipe.context.train.caption_ids.tolist()))
        trainer.train_epoch(0)

    return record


def test_a_round_trusts_the_pairs_judged_correct_and_never_trains_on_those_judged_mismatched():
    config, data, train = _setup()
    trusted = np.random.default_rng(3).random(len(train)) < 0.6
    judged = judgements(len(train))
    seen = []
    scores = out_of_fold_scores(
        HeldOutScoring(config, HeldOutPlan(folds=3, score_kind="contrast"), judged=judged),
        data,
        train,
        runtime=Runtime(train_fold=record_into(seen)),
        round_start=RoundStart(trusted=trusted),
    )
    for k, trained in enumerate(seen):
        outside = scores.fold[0] != k
        expected = (outside & trusted & (judged != 1)) | (outside & (judged == 0))
        assert trained == set(np.flatnonzero(expected).tolist())


def test_down_nested_trusts_lattice_no_scorer_trains_on_a_pair_judged_mismatched():
    config, data, train = _setup()
    judged = judgements(len(train), seed=2)
    seen = []
    plan = HeldOutPlan(folds=3, rounds=2, nested_trust=True, score_kind="contrast")
    scores = refined_out_of_fold_scores(
        HeldOutScoring(config, plan, judged=judged),
        data,
        train,
        runtime=Runtime(train_fold=record_into(seen)),
    )
    mismatched, correct = set(np.flatnonzero(judged == 1)), np.flatnonzero(judged == 0)
    assert len(seen) == 3 + 3  # a scorer per two folds held out at once, then one per fold
    for trained in seen:
        assert not trained & mismatched
    fold = scores.fold[0]
    for trained in seen[3:]:  # the last round's: every pair judged correct outside the fold it holds out
        k = next(k for k in range(3) if not trained & set(np.flatnonzero(fold == k)))
        assert set(correct[fold[correct] != k]) <= trained


def rows_of(config, train):
    return AuditRows.of(train, None, [config.data.train_split] * len(train))


def test_the_answers_file_names_pairs_as_the_audit_does_and_refuses_strangers(tmp_path):
    _, _, train = _setup()
    rows = AuditRows.of(train, None, ["train"] * (len(train) - 4) + ["dev"] * 4)
    ids = rows.pair_ids
    assert ids[0] == "train/0" and ids[-1] == "dev/3"
    path = tmp_path / "labels.csv"
    path.write_text(f"pair_id,label\n{ids[0]},mismatched\n{ids[5]},correct\n{ids[7]},unsure\ndev/3,correct\n")
    judged = judged_pairs([path], replace(rows, n_train=len(train) - 4))
    assert len(judged) == len(train) - 4  # the training pairs'; dev/3's answer trains nothing
    assert (
        judged[0] == 1
        and judged[5] == 0
        and np.isnan(judged[7])
        and np.isnan(judged).sum() == len(judged) - 2
    )
    path.write_text("pair_id,label\nnowhere/1,correct\n")
    with pytest.raises(DataError, match="in no split of this collection"):
        judged_pairs([path], rows)


def test_the_rows_id_is_the_audits_id_of_the_same_table():
    """The id the scorers check the answers against is the one the audit's table gets."""
    rows = AuditRows(
        ["train/10", "train/2", "é/1", "train/1"],
        ["b.png", "a.png", "ü.png", "a.png"],
        ['a cat, "quoted"', "two\nlines", "ünïcode", "x\x1fy"],
        n_train=4,
    )
    table = pd.DataFrame({"pair_id": rows.pair_ids, "image_id": rows.image_ids, "caption": rows.captions})
    assert rows.audit_id == audit_id(table) == audit_id(table.iloc[::-1])


def test_another_audits_answers_are_refused_as_estimate_refuses_them(tmp_path):
    config, _, train = _setup()
    rows = rows_of(config, train)
    path = tmp_path / "labels.csv"
    path.write_text(f"pair_id,label,audit_id\n{rows.pair_ids[0]},correct,0123456789abcdef\n")
    with pytest.raises(DataError) as refused:
        judged_pairs([path], rows)
    with pytest.raises(DataError) as by_estimate:
        read_labels(path, audit=rows.audit_id)
    assert str(refused.value) == str(by_estimate.value)
    assert "answers given on audit 0123456789abcdef, not on this audit" in str(refused.value)
    path.write_text(
        f"pair_id,label,audit_id\n{rows.pair_ids[0]},correct,{rows.audit_id}\n{rows.pair_ids[1]},mismatched,\n"
    )
    judged = judged_pairs([path], rows)  # this audit's (a row without its id is taken too)
    assert judged[0] == 0 and judged[1] == 1


def test_the_cached_scores_follow_the_answers_content(tmp_path):
    config, data, train = _setup(["division.scored_by=out_of_fold", "division.folds=2", "division.epochs=1"])
    ids = rows_of(config, train).pair_ids
    labels = tmp_path / "labels.csv"
    labels.write_text(f"pair_id,label\n{ids[0]},mismatched\n")
    config = replace(config, division=replace(config.division, answers=[str(labels)]))
    cache = tmp_path / "pair_scores.npz"
    division_scores(config, data, train, Runtime(), cache=cache)

    def trained(calls):
        return Runtime(train_fold=lambda t: calls.append(1) or t.train_epoch(0))

    again = []
    division_scores(config, data, train, trained(again), cache=cache)
    assert not again  # the same answers: read back
    labels.write_text(f"pair_id,label\n{ids[0]},correct\n")  # the same file, another answer
    changed = []
    division_scores(config, data, train, trained(changed), cache=cache)
    assert changed  # scored again: the cache's key holds the answers


def test_audit_with_labels_uses_them_and_says_where_their_estimate_is(tmp_path, capsys):
    """Answers on an audit's sample give its estimate; fed back to `audit --labels`, they move the
    probabilities and so the new audit's stratified order: one line, not an error, says that
    their estimate is the earlier audit's."""
    from tests.audit.test_audit_run import TINY

    collection = write_synthetic_dataset(tmp_path / "toy_precomp", n_train=60, n_dev=20, n_test=20)
    first = tmp_path / "first"
    assert main(["audit", str(collection), *TINY, "--out", str(first), "--quiet"]) in (0, None)
    order = pd.read_csv(first / "sample.csv")["pair_id"].tolist()
    labels = tmp_path / "labels.csv"
    with open(labels, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["pair_id", "label"])
        writer.writerows((pid, "mismatched" if k % 4 == 0 else "correct") for k, pid in enumerate(order[:40]))
    found = AuditResult.load(first).estimate(labels)
    assert (found.share.answers, found.share.mismatched) == (40, 10)
    out = tmp_path / "audit"
    code = main(["audit", str(collection), *TINY, "--out", str(out), "--labels", str(labels), "--quiet"])
    assert code in (0, None)
    err = capsys.readouterr().err
    # the answers moved the probabilities, so the order: one line says where their estimate is
    assert not (out / "estimate.json").exists()
    assert "no estimate of this audit from the answers" in err and "`mispair estimate` on that audit" in err
    run_config = json.loads((out / "run" / "config.json").read_text())
    assert run_config["division"]["answers"] == [str(labels.resolve())]
    again = main(["audit", str(collection), *TINY, "--out", str(out), "--quiet", "--no-resume"])
    assert again in (0, None)  # a folder holding an estimate is still the audit's to write again
    assert not (out / "estimate.json").exists()  # the answers' estimate of the earlier audit is gone

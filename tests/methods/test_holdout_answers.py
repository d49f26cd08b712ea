"""``mispair train --labels``: a person's answers decide the ``holdout`` recipe's trust where the
scores would (a pair judged correct trains its positive at full weight, one judged mismatched only
its negatives), the held-out scorers take them as the audit's do, and the cached scores come back
with them; a recipe that cannot take them is one error line."""

import csv

import numpy as np
import pandas as pd

from mispair.cli import main
from mispair.config import load_config
from mispair.engine.export import export_training_pairs
from mispair.methods.holdout import answered_clean_probability
from tests.engine.test_answers import judgements, rows_of
from tests.engine.test_division_scores import HELD_OUT, TINY, _setup


def test_the_answers_replace_the_scores_word_pair_by_pair():
    rng = np.random.default_rng(4)
    clean = rng.random(300)
    answers = judgements(300, seed=5)
    got = answered_clean_probability(clean, answers)
    for k in range(300):
        expected = clean[k] if np.isnan(answers[k]) else 1.0 - answers[k]
        assert got[k] == expected
    assert answered_clean_probability(clean, None) is clean


def _labels(tmp_path, ids, judged):
    path = tmp_path / "labels.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["pair_id", "label"])
        for k in np.flatnonzero(~np.isnan(judged)):
            writer.writerow([ids[k], "mismatched" if judged[k] == 1 else "correct"])
    return path


SHORT = ["recipe=holdout", *HELD_OUT, "division.epochs=2", "train.epochs=2"]


def test_train_with_labels_trusts_the_judged_pairs_as_judged(tmp_path, capsys):
    config, _, train = _setup()
    ids = rows_of(config, train).pair_ids
    judged = judgements(len(train), seed=7)
    labels = _labels(tmp_path, ids, judged)
    out = tmp_path / "run"
    status = main(["train", *TINY, *SHORT, "--out", str(out), "--quiet", "--labels", str(labels)])
    assert status in (0, None)
    run = load_config(None, [*TINY, *SHORT, f"output={out}"])
    exported = pd.DataFrame(export_training_pairs(run)).sort_values("caption_index")
    clean = exported["clean_prob"].to_numpy()
    assert np.array_equal(clean[judged == 0], np.ones(int((judged == 0).sum())))
    assert np.array_equal(clean[judged == 1], np.zeros(int((judged == 1).sum())))
    unjudged = clean[np.isnan(judged)]
    assert ((unjudged > 0) & (unjudged < 1)).mean() > 0.5  # the scores' word elsewhere


def test_labels_with_a_recipe_that_cannot_take_them_is_one_line(tmp_path, capsys):
    labels = tmp_path / "labels.csv"
    labels.write_text("pair_id,label\ntrain/0,correct\n")
    status = main(["train", *TINY, "recipe=vse", "--out", str(tmp_path / "run"), "--labels", str(labels)])
    err = capsys.readouterr().err
    assert status == 2 and "recipe vse does not take a person's answers" in err
    assert "Traceback" not in err and not (tmp_path / "run").exists()


def test_labels_of_another_collection_are_refused_before_training(tmp_path, capsys):
    labels = tmp_path / "labels.csv"
    labels.write_text("pair_id,label\nnowhere/1,mismatched\n")
    status = main(["train", *TINY, *SHORT, "--out", str(tmp_path / "run"), "--labels", str(labels)])
    err = capsys.readouterr().err
    assert status == 2 and "in no split of this collection" in err and "Traceback" not in err

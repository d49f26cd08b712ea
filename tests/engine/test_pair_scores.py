"""Out-of-fold pair scores: no pair is scored by a model that trained on it, and they keep
detecting planted mismatches after the in-sample scores have memorised them."""

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from mispair.config import load_config
from mispair.data.batching import TrainingPairs, encode_captions
from mispair.encoding import pair_similarities
from mispair.engine.assembly import load_run_data
from mispair.engine.held_out import (
    HeldOutPlan,
    HeldOutScoring,
    RoundStart,
    Runtime,
    out_of_fold_scores,
    train_scorer,
)

THREE = HeldOutPlan(folds=3)
THREE_TWICE = HeldOutPlan(folds=3, repeats=2)


def _setup(images: int, epochs: int):
    config = load_config(
        None,
        [
            "data.source=synthetic",
            f"data.synthetic_images={images}",
            "data.noise.rate=0.4",
            "data.noise.protocol=pmp",
            "method.loss=infonce",
            "model.embed_dim=64",
            "model.word_dim=32",
            f"train.epochs={epochs}",
            "train.batch_size=32",
            "train.lr=0.002",
            "train.lr_decay_epochs=[]",
        ],
    )
    data = load_run_data(config)
    tokens = encode_captions(data.train, data.tokenizer)
    return config, data, TrainingPairs(data.train, tokens, data.noise.image_of_caption)


def test_no_pair_is_scored_by_a_model_that_trained_on_it():
    config, data, train = _setup(60, 1)
    seen = []

    def record(trainer):  # the pairs and images each fold's model trains on
        pairs = trainer.recipe.context.train
        trained = {int(i) for b in pairs.batches(16) for i in b.index}
        seen.append((trained, set(pairs.image_of_caption.tolist())))
        trainer.train_epoch(0)

    scores = out_of_fold_scores(
        HeldOutScoring(config, THREE), data, train, runtime=Runtime(train_fold=record)
    )
    assert len(seen) == 3
    for k, (trained, images) in enumerate(seen):
        held_out = np.flatnonzero(scores.fold[0] == k)
        assert trained == set(np.flatnonzero(scores.fold[0] != k).tolist())
        assert not trained & set(held_out.tolist())
        assert not images & set(train.image_of_caption[held_out].tolist())
        trained_texts = {tuple(train.tokens[i]) for i in trained}
        assert not trained_texts & {tuple(train.tokens[i]) for i in held_out}  # no caption text either
    assert np.isfinite(scores.score).all() and (scores.score != 0).any()


@pytest.mark.slow  # twins in the default run: the test above; test_division_scores.py (out-of-fold AUC > 0.8)
def test_out_of_fold_scores_stay_high_while_in_sample_scores_collapse():
    config, data, train = _setup(120, 20)
    clean = ~data.noise.is_noisy
    in_sample = []

    def track(trainer):  # the in-sample AUC of one model trained on every pair
        model = trainer.recipe.models[0]
        for epoch in range(config.train.epochs):
            trainer.train_epoch(epoch)
            if epoch in (4, config.train.epochs - 1):
                scores = pair_similarities([model.eval()], train, 256, torch.device("cpu"))
                in_sample.append(roc_auc_score(clean, scores))
                model.train()

    train_scorer(config, data, train, torch.device("cpu"), track)
    oof = roc_auc_score(clean, out_of_fold_scores(HeldOutScoring(config, THREE), data, train).score)
    assert in_sample[-1] < in_sample[0]  # the model fits the mismatched pairs it trains on
    assert oof > 0.85 and oof > in_sample[-1] + 0.15


def test_a_scorer_warm_started_from_the_scorer_of_its_fold_scores_as_it_did_before_training():
    """The weights handed to each job are those of the scorer that held out the same fold: with no
    training on top they score every held-out pair exactly as round 1 did (a scorer of another
    fold, which trained on these pairs, would not)."""
    config, data, train = _setup(60, 1)
    first = out_of_fold_scores(
        HeldOutScoring(config, THREE_TWICE), data, train, round_start=RoundStart(keep_scorers=True)
    )
    assert sorted(first.scorers) == list(range(6))
    untouched = out_of_fold_scores(
        HeldOutScoring(config, THREE_TWICE),
        data,
        train,
        runtime=Runtime(train_fold=lambda trainer: None),
        round_start=RoundStart(start=first.scorers),
    )
    np.testing.assert_allclose(untouched.score, first.score, rtol=0, atol=1e-6)
    shuffled = {job: first.scorers[(job + 1) % 6] for job in first.scorers}  # each job another fold's
    leaked = out_of_fold_scores(
        HeldOutScoring(config, THREE_TWICE),
        data,
        train,
        runtime=Runtime(train_fold=lambda trainer: None),
        round_start=RoundStart(start=shuffled),
    )
    assert np.abs(leaked.score - first.score).max() > 1e-3


def test_warm_started_rounds_train_refine_epochs_from_the_last_round_and_resume_from_the_stash(
    tmp_path, monkeypatch
):
    from mispair.engine import held_out
    from mispair.engine.held_out import scorers

    config, data, train = _setup(60, 3)
    calls = []
    original = scorers.train_scorer

    def spy(cfg, data, pairs, device, train_fold=None, *, start=None):
        calls.append((cfg.train.epochs, start is not None))
        return original(cfg, data, pairs, device, train_fold, start=start)

    monkeypatch.setattr(scorers, "train_scorer", spy)
    stash = held_out.FoldStash(tmp_path / "folds", "key")
    plan = HeldOutPlan(folds=3, rounds=3, refine_epochs=1)
    scores = held_out.refined_out_of_fold_scores(
        HeldOutScoring(config, plan), data, train, runtime=Runtime(stash=stash)
    )
    assert calls == [(3, False)] * 3 + [(1, True)] * 6  # round 1 from scratch, then warm and short
    assert len(list((tmp_path / "folds").glob("*.pt"))) == 6  # the weights rounds 2 and 3 start from
    calls.clear()
    again = held_out.refined_out_of_fold_scores(
        HeldOutScoring(config, plan), data, train, runtime=Runtime(stash=stash)
    )
    assert calls == [] and np.array_equal(again.score, scores.score)

"""Scorers trained side by side (one batched step for all) end where each would end trained alone
by the generic trainer: same batches, initial weights, clipping and Adam steps."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from mispair.config import load_config
from mispair.data.batching import TrainingPairs, encode_captions
from mispair.engine.assembly import build_models, load_run_data
from mispair.engine.held_out import HeldOutPlan, HeldOutScoring, Runtime, out_of_fold_scores
from mispair.engine.held_out.scorers import ScorerRun, train_scorer, trained_scorers
from mispair.engine.held_out.side_by_side import LinearInputs, side_by_side_spec
from mispair.nn.linear_backbone import LINEAR_WEIGHTS

BACKBONE = ["model.head=cosine", "model.text_encoder=minilm", "model.image_pooling=features"]


def _setup(extra=()):
    config = load_config(
        None,
        [
            "data.source=synthetic",
            "data.synthetic_images=40",
            "data.noise.rate=0.4",
            "data.noise.protocol=pmp",
            *BACKBONE,
            "model.embed_dim=32",
            "train.batch_size=16",
            "train.lr=0.003",
            "division.epochs=3",
            "division.scorer_options={loss: infonce, tau: 0.2}",
            *extra,
        ],
    )
    data = load_run_data(config)
    tokens = encode_captions(data.train, data.tokenizer)
    return (
        HeldOutScoring.of(config).scorer,
        data,
        TrainingPairs(data.train, tokens, data.noise.image_of_caption),
    )


def _runs(config, data, train):
    """Three scorers on subsets of different sizes (their last batches differ, one finishes
    early), one of them warm-started from another model's weights."""
    rng = np.random.default_rng(0)
    runs = []
    for k, size in enumerate((len(train) - 7, len(train) // 2 + 3, len(train) - 30)):
        seeded = replace(config, train=replace(config.train, seed=100 + k))
        runs.append(ScorerRun(k, seeded, np.sort(rng.choice(len(train), size, replace=False))))
    start = build_models(replace(config, train=replace(config.train, seed=7)), 1, data, "cpu")[0]
    runs[2] = replace(runs[2], start={n: t.clone() for n, t in start.state_dict().items()})
    return runs


@pytest.mark.parametrize(
    ("extra", "decay_epochs"),
    [((), []), (("train.grad_clip=0.05",), []), (("train.weight_decay=0.01", "division.epochs=4"), [2])],
    ids=["default", "clipped", "weight-decay-and-lr-decay"],
)
def test_side_by_side_weights_equal_each_scorer_trained_alone(extra, decay_epochs):
    config, data, train = _setup(extra)
    config = replace(config, train=replace(config.train, lr_decay_epochs=decay_epochs))
    runs = _runs(config, data, train)
    device = torch.device("cpu")
    together = {run.job: model.state_dict() for run, model in trained_scorers(runs, data, train, device)}
    for run in runs:
        alone = train_scorer(run.config, data, train.subset(run.pairs), device, start=run.start).state_dict()
        for name in LINEAR_WEIGHTS:
            moved = (alone[name] - (run.start or {}).get(name, torch.zeros(()))).abs().max()
            assert moved > 1e-3  # trained at all
            torch.testing.assert_close(together[run.job][name], alone[name], atol=2e-5, rtol=1e-4)


def test_out_of_fold_scores_side_by_side_equal_the_sequential_ones():
    config, data, train = _setup()

    def alone(trainer):  # the default training through the hook: the one-by-one path
        for epoch in range(config.train.epochs):
            trainer.train_epoch(epoch)

    plan = HeldOutPlan(folds=3, repeats=2, score_kind="contrast", tau=0.2)
    batched = out_of_fold_scores(HeldOutScoring(config, plan), data, train)
    sequential = out_of_fold_scores(
        HeldOutScoring(config, plan), data, train, runtime=Runtime(train_fold=alone)
    )
    np.testing.assert_allclose(batched.score, sequential.score, atol=1e-4)
    assert np.corrcoef(batched.score, sequential.score)[0, 1] > 0.9999


@pytest.mark.parametrize(
    "extra",
    [
        ("division.scorer_options={loss: triplet}",),
        ("model.text_encoder=bigru",),
        ("model.head=sgr", "model.head_options.num_regions=12"),
        ("train.optimizer=adamw",),
        ("model.image_pooling=fragments",),
        ("model.image_mlp=true",),
    ],
)
def test_runs_it_cannot_reproduce_are_left_to_the_trainer(extra):
    config, data, _ = _setup(extra)
    model = build_models(config, 1, data, "cpu")[0]
    assert side_by_side_spec(config, model) is None


def test_the_audit_scorer_is_trained_side_by_side():
    config, data, _ = _setup()
    spec = side_by_side_spec(config, build_models(config, 1, data, "cpu")[0])
    assert spec is not None and spec.tau == 0.2 and spec.epochs == 3 and spec.batch_size == 16


def test_the_linear_inputs_read_the_caption_cache_in_place():
    config, data, train = _setup()
    model = build_models(config, 1, data, "cpu")[0]
    inputs = LinearInputs.of(model, train, torch.device("cpu"))
    table, _ = model.text_encoder.caption_table(train.tokens)
    assert inputs.captions.data_ptr() == table.data_ptr()  # no copy of a million vectors
    np.testing.assert_array_equal(
        inputs.captions[inputs.caption_rows].numpy(), model.text_encoder.caption_vectors(train.tokens).numpy()
    )

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
from mispair.engine.held_out.side_by_side import (
    LinearInputs,
    ScorerJob,
    SideBySideSpec,
    _input_major,
    batch_schedule,
    batched_info_nce,
    clip_rows,
    side_by_side_spec,
    train_side_by_side,
)
from mispair.nn.embedding import l2_normalize
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


def _autograd_reference(jobs, inputs, spec):
    """The side-by-side training as it was written first: every weight a leaf of autograd (a
    group's rows indexed out of the stacked weights, their gradients scattered back), each
    scorer's clipping and Adam step over its own rows, one fused Adam call per row."""
    params = [
        torch.stack([_input_major(job.start[name].float()) for job in jobs]).requires_grad_()
        for name in LINEAR_WEIGHTS
    ]
    moments = [[torch.zeros_like(p) for p in params] for _ in range(2)]
    steps = [torch.zeros(()) for _ in jobs]
    schedules = [batch_schedule(job, spec) for job in jobs]
    for t in range(max(len(s) for s in schedules)):
        active = [j for j, s in enumerate(schedules) if t < len(s)]
        loss = 0
        for size in sorted({len(schedules[j][t][0]) for j in active}):
            group = [j for j in active if len(schedules[j][t][0]) == size]
            pairs = torch.from_numpy(np.stack([schedules[j][t][0] for j in group]))
            w_image, b_image, w_text, b_text = (p[torch.tensor(group)] for p in params)
            images = inputs.images[inputs.image_of_caption[pairs]]
            captions = inputs.captions[inputs.caption_rows[pairs]]
            image_side = torch.baddbmm(b_image[:, None, :], images, w_image)
            text_side = torch.baddbmm(b_text[:, None, :], captions, w_text)
            loss = loss + batched_info_nce(l2_normalize(image_side), l2_normalize(text_side), spec.tau).sum()
        for p in params:
            p.grad = None
        loss.backward()
        if spec.grad_clip > 0:
            clip_rows([p.grad for p in params], spec.grad_clip)
        with torch.no_grad():
            for j in active:
                steps[j] += 1
                torch._fused_adam_(
                    [p[j] for p in params],
                    [p.grad[j] for p in params],
                    [m[j] for m in moments[0]],
                    [v[j] for v in moments[1]],
                    [],
                    [steps[j]] * len(params),
                    lr=spec.lr_at(schedules[j][t][1]),
                    beta1=0.9,
                    beta2=0.999,
                    weight_decay=spec.weight_decay,
                    eps=1e-8,
                    amsgrad=False,
                    maximize=False,
                )
    return [
        {n: _input_major(p.detach()[j]) for n, p in zip(LINEAR_WEIGHTS, params)} for j in range(len(jobs))
    ]


@pytest.mark.parametrize(
    ("sizes", "spec"),
    [
        ((200, 200, 200), SideBySideSpec(0.2, 16, 3, 3e-3, 0.1, (), 2.0, 0.0)),
        ((200, 171, 97, 200), SideBySideSpec(0.2, 16, 4, 3e-3, 0.1, (2,), 0.05, 0.01)),
        ((150,), SideBySideSpec(0.1, 32, 2, 1e-3, 0.1, (), 0.0, 0.0)),
    ],
    ids=["one-size", "ragged-clipped-decayed", "one-scorer"],
)
def test_the_step_equals_autograd_through_the_stacked_weights_to_the_bit(sizes, spec):
    """The step computes the weights' gradients itself (into gradients kept across steps) and
    updates every row in one Adam call when all rows share a step count and learning rate; the
    arithmetic is the same, so every weight equals autograd's and the per-row Adam's exactly
    (scorers of different sizes: groups of batch sizes, rows that finish early, rows stepped
    apart)."""
    rng = np.random.default_rng(1)
    torch.manual_seed(1)
    n = 300
    inputs = LinearInputs(torch.randn(60, 48), torch.randn(n, 24), torch.arange(n), torch.arange(n) // 5)
    shapes = dict(zip(LINEAR_WEIGHTS, [(16, 48), (16,), (16, 24), (16,)]))
    jobs = [
        ScorerJob(
            np.sort(rng.choice(n, size, replace=False)),
            10 + i,
            {name: 0.1 * torch.randn(shape) for name, shape in shapes.items()},
        )
        for i, size in enumerate(sizes)
    ]
    got = train_side_by_side(jobs, inputs, spec, torch.device("cpu"))
    for mine, theirs, job in zip(got, _autograd_reference(jobs, inputs, spec), jobs):
        for name in LINEAR_WEIGHTS:
            assert (mine[name] - job.start[name]).abs().max() > 1e-3  # trained at all
            assert torch.equal(mine[name], theirs[name])

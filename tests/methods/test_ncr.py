"""The NCR co-training skeleton and the ncr recipe: brute-force checks and a tiny noisy run."""

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mispair.config import load_config
from mispair.engine.run import train_run
from mispair.losses import correspondence_prediction, mean_hinge_loss, soft_margin


def _hinges(sims, margin):
    n = sims.shape[0]
    i2t = [
        [max(0.0, margin - sims[i, i] + sims[i, j]) if j != i else 0.0 for j in range(n)] for i in range(n)
    ]
    t2i = [
        [max(0.0, margin - sims[i, i] + sims[j, i]) if j != i else 0.0 for j in range(n)] for i in range(n)
    ]
    return np.array(i2t), np.array(t2i)


def test_mean_hinge_loss_matches_loop():
    sims = torch.rand(7, 7, dtype=torch.float64) * 2 - 1
    i2t, t2i = _hinges(sims.numpy(), 0.2)
    expected = i2t.mean(axis=1) + t2i.mean(axis=1)
    assert np.allclose(mean_hinge_loss(sims, 0.2).numpy(), expected, rtol=1e-12)


def test_correspondence_prediction_matches_loop():
    sims = torch.rand(23, 23, dtype=torch.float64) * 2 - 1
    sims += torch.eye(23, dtype=torch.float64) * torch.rand(23, dtype=torch.float64)
    i2t, t2i = _hinges(sims.numpy(), 0.2)
    p = np.clip(0.2 - (i2t.mean(axis=1) + t2i.mean(axis=1)) / 2, 0, 0.2)
    top = np.sort(p)[-(23 // 10 + 1) :]
    expected = np.clip(p / top.mean(), 0, 1)
    assert np.allclose(correspondence_prediction(sims, 0.2).numpy(), expected, rtol=1e-12)


def test_no_violation_free_pair_keeps_margins_within_alpha():
    # every positive sits below some negative: each pair violates, the top predictions differ and
    # their ratio to the top mean exceeds 1 before NCR's clamp (1.047 was observed in a run)
    rng = np.random.default_rng(3)
    sims = torch.as_tensor(rng.uniform(-0.2, 0.6, size=(32, 32)))
    sims.fill_diagonal_(0.0)
    sims += torch.diag(torch.as_tensor(rng.uniform(0.0, 0.5, size=32)))
    i2t, t2i = _hinges(sims.numpy(), 0.2)
    assert ((i2t > 0).any(axis=1) | (t2i > 0).any(axis=1)).all()
    p = np.clip(0.2 - (i2t.mean(axis=1) + t2i.mean(axis=1)) / 2, 0, 0.2)
    assert (p / np.sort(p)[-(32 // 10 + 1) :].mean()).max() > 1.0  # the case the clamp is for
    prediction = correspondence_prediction(sims, 0.2)
    assert prediction.min() >= 0.0 and prediction.max() <= 1.0
    for w in (0.0, 0.3, 1.0):  # the target ŷ = w + (1 − w) p of ncr and asl
        margins = soft_margin(w + (1 - w) * prediction, 0.2)
        assert (margins >= 0).all() and (margins <= 0.2 + 1e-12).all()


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 40), st.integers(0, 2**31 - 1), st.floats(0.05, 0.5))
def test_prediction_is_a_probability(n, seed, margin):
    sims = torch.as_tensor(np.random.default_rng(seed).uniform(-1, 1, size=(n, n)))
    prediction = correspondence_prediction(sims, margin)
    assert prediction.shape == (n,)
    assert (prediction >= 0).all() and (prediction <= 1).all()


def test_soft_margin_closed_form():
    targets = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64)
    expected = 0.2 * (10 ** targets.numpy() - 1) / 9
    assert np.allclose(soft_margin(targets, 0.2, 10.0).numpy(), expected)
    assert soft_margin(torch.tensor(1.0), 0.2) == torch.tensor(0.2)


def _tiny_ncr(tmp_path, **extra):
    overrides = [
        "recipe=ncr",
        "data.source=synthetic",
        "data.synthetic_images=300",
        "data.noise.rate=0.5",
        "data.noise.protocol=ncr",
        "model.embed_dim=64",
        "model.word_dim=32",
        "train.epochs=5",
        "train.batch_size=64",
        "train.lr=2e-3",
        "train.threads=1",
        "method.warmup_epochs=3",
        f"output={tmp_path}",
    ] + [f"{k}={v}" for k, v in extra.items()]
    return train_run(load_config(None, overrides), progress=False, log=lambda m: None)


@pytest.mark.slow  # twin in the default run: test_single_process_unchanged.py[ncr] (every number)
def test_tiny_ncr_run_detects_noise_and_co_divides(tmp_path, monkeypatch):
    from mispair.methods.cotrain import CoTraining

    seen = []
    original = CoTraining.labeled_split

    def spy(self, k):
        mask = original(self, k)
        seen.append((k, mask, self.clean_prob.copy()))
        return mask

    monkeypatch.setattr(CoTraining, "labeled_split", spy)
    summary = _tiny_ncr(tmp_path)
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert "division/0/auc" not in log[0]  # warm-up epochs divide nothing
    for record in log[3:]:
        assert record["division/0/auc"] > 0.8 and record["division/1/auc"] > 0.8
    # co-divide: model k trains on the split computed from the other model's losses
    for k, mask, prob in seen:
        assert np.array_equal(mask, prob[1 - k] > 0.5) or (prob[1 - k] > 0.5).all()
    assert summary["test"]["rsum"] > 300


def test_division_batch_size_option(make_recipe, monkeypatch):
    from mispair.methods import scoring

    sizes = []
    real = scoring.per_sample_losses

    def spy(*args, batch_size, **kwargs):
        sizes.append(batch_size)
        return real(*args, batch_size=batch_size, **kwargs)

    monkeypatch.setattr(scoring, "per_sample_losses", spy)
    make_recipe("ncr", eval_batch_size=64, warmup_epochs=0).begin_epoch(0)
    make_recipe("ncr", eval_batch_size=64, warmup_epochs=0, division_batch_size=128).begin_epoch(0)
    assert sizes == [64, 128]

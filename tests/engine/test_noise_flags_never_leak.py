"""The noise flags never shape a division: permuting the truth (which pairs are mismatched, and their
true images) while the pairing stays the same leaves the held-out scores, the clean probabilities and
the trained weights identical; only the logged detection scores (which read the truth) change. The
check catches a leak: feeding the flags into the scores makes it fail."""

import numpy as np
import pytest
import torch

from mispair.data.noise import NoiseRecord, inject_noise
from mispair.engine import context as engine_context
from mispair.engine.run import train_run
from mispair.engine.trained import load_checkpoint
from tests.engine.tiny_runs import tiny_config


def _records(tmp_path):
    truth = inject_noise(200, 5, 0.3, "pmp", seed=3)
    order = np.random.default_rng(0).permutation(len(truth.is_noisy))
    shuffled = NoiseRecord(truth.image_of_caption, truth.true_image[order], truth.is_noisy[order])
    assert not np.array_equal(shuffled.is_noisy, truth.is_noisy)
    paths = tmp_path / "truth.npy", tmp_path / "shuffled.npy"
    truth.save(paths[0])
    shuffled.save(paths[1])
    return paths


def _trained(record, out):
    config = tiny_config("holdout", out, (f"data.noise.file={record}", "data.noise.rate=0"))
    train_run(config, progress=False, log=lambda _: None)
    with np.load(out / "pair_scores.npz") as saved:
        scores = saved["score"]
    state = load_checkpoint(out / "best.pt")
    return scores, np.asarray(state["recipe"]["clean_prob"]), state["models"]


def _assert_same_division(a, b):
    assert np.array_equal(a[0], b[0]), "held-out scores differ"
    assert np.array_equal(a[1], b[1]), "clean probabilities differ"
    for weights_a, weights_b in zip(a[2], b[2]):
        assert all(torch.equal(weights_a[k], weights_b[k]) for k in weights_a), "weights differ"


def test_permuted_noise_flags_leave_the_division_unchanged(tmp_path):
    truth, shuffled = _records(tmp_path)
    _assert_same_division(_trained(truth, tmp_path / "a"), _trained(shuffled, tmp_path / "b"))


def test_the_check_fails_when_the_flags_are_fed_into_the_scores(tmp_path, monkeypatch):
    truth, shuffled = _records(tmp_path)
    real = engine_context.division_scores

    def leaking(config, data, train, *args, **kwargs):
        scores = real(config, data, train, *args, **kwargs)
        leak = data.noise.is_noisy.astype(np.float32)
        return type(scores)(scores.train - leak, scores.others)

    monkeypatch.setattr(engine_context, "division_scores", leaking)
    with pytest.raises(AssertionError, match="differ"):
        _assert_same_division(_trained(truth, tmp_path / "a"), _trained(shuffled, tmp_path / "b"))

"""The truth never reaches the division: a run whose noise record's flags (which pairs are truly
mismatched, and their true images) are permuted, with the training pairing unchanged, computes the
same held-out scores, the same clean probabilities and so the same ranking, to the bit. The flags
only feed the logged detection figures. The same check catches a leak planted on purpose."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import mispair.engine.context as engine_context
import mispair.engine.run as engine_run
from mispair.division.scores import DivisionScores
from mispair.engine.run import train_run
from mispair.engine.trained import TrainedRun
from tests.engine.tiny_runs import tiny_config

LOAD_RUN_DATA = engine_run.load_run_data
DIVISION_SCORES = engine_context.division_scores


def loader(permute: bool, seen: dict | None = None):
    """``load_run_data`` with the noise record's flags and true images permuted among the pairs
    when ``permute`` (the pairing the run trains on is the same); the flags the run sees are kept
    in ``seen["noisy"]``."""

    def load(config):
        data = LOAD_RUN_DATA(config)
        if permute:
            order = np.random.default_rng(7).permutation(len(data.noise.is_noisy))
            noise = data.noise
            data = replace(
                data, noise=replace(noise, is_noisy=noise.is_noisy[order], true_image=noise.true_image[order])
            )
        if seen is not None:
            seen["noisy"] = data.noise.is_noisy.astype(np.float32)
        return data

    return load


def run_outputs(recipe: str, out, monkeypatch, *, permute: bool, seen: dict | None = None):
    """``(held-out scores, or [] for a recipe without them; clean probabilities)`` of the tiny run
    of ``recipe`` under :func:`loader`."""
    monkeypatch.setattr(engine_run, "load_run_data", loader(permute, seen))
    train_run(tiny_config(recipe, out), progress=False, log=lambda _: None)
    kept = DivisionScores.read(out / "pair_scores.npz")
    return (np.zeros(0) if kept is None else kept.train), TrainedRun.open(out / "best.pt").clean_prob


@pytest.mark.parametrize(
    "recipe",  # holdout in the slow suite: its twin, test_noise_flags_never_leak.py, checks the weights too
    [pytest.param("holdout", marks=pytest.mark.slow), "ncr"],
)
def test_permuting_the_noise_flags_changes_nothing_the_division_computes(recipe, tmp_path, monkeypatch):
    scores, clean_prob = run_outputs(recipe, tmp_path / "given", monkeypatch, permute=False)
    scores_p, clean_prob_p = run_outputs(recipe, tmp_path / "permuted", monkeypatch, permute=True)
    assert clean_prob is not None and len(clean_prob) > 0
    assert np.array_equal(scores, scores_p)
    assert np.array_equal(clean_prob, clean_prob_p)
    assert np.array_equal(np.argsort(clean_prob, kind="stable"), np.argsort(clean_prob_p, kind="stable"))


def test_the_check_catches_flags_fed_into_the_scores(tmp_path, monkeypatch):
    seen: dict = {}

    def leaky_division_scores(config, data, train, *args, **kwargs):  # a planted leak
        scores = DIVISION_SCORES(config, data, train, *args, **kwargs)
        return replace(scores, train=scores.train - seen["noisy"])

    monkeypatch.setattr(engine_context, "division_scores", leaky_division_scores)
    _, clean_prob = run_outputs("holdout", tmp_path / "given", monkeypatch, permute=False, seen=seen)
    _, clean_prob_p = run_outputs("holdout", tmp_path / "permuted", monkeypatch, permute=True, seen=seen)
    assert not np.array_equal(clean_prob, clean_prob_p)

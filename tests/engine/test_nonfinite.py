"""A broken model never looks good: non-finite similarities are an error, and training stops at
a non-finite loss before it reaches the weights, keeping the last finished epoch."""

import math

import numpy as np
import pytest
import torch

from mispair.cli import main
from mispair.config import load_config
from mispair.engine.metrics import retrieval_metrics
from mispair.engine.run import train_run
from mispair.engine.trained import load_checkpoint
from mispair.errors import ConfigError, DivergedError
from mispair.methods.base import Update
from mispair.methods.vse import VSE


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_similarities_are_an_error(bad):
    sims = np.random.default_rng(0).normal(size=(4, 20))
    sims[1, 3] = bad
    with pytest.raises(DivergedError, match="1 similarities are NaN or infinite"):
        retrieval_metrics(sims, 5)
    with pytest.raises(DivergedError):  # all NaN used to rank every caption as a match: rSum 600
        retrieval_metrics(np.full((4, 20), np.nan), 5)


@pytest.mark.parametrize("lr", [".inf", ".nan", "0", "-1e-3"])
def test_learning_rate_must_be_finite_and_positive(lr):
    with pytest.raises(ConfigError, match=r"^train\.lr: "):
        load_config(None, [f"train.lr={lr}"])


def _overrides(tmp_path):
    return [
        "data.source=synthetic",
        "data.synthetic_images=100",
        "model.embed_dim=16",
        "model.word_dim=8",
        "train.epochs=3",
        "train.batch_size=50",
        "train.threads=1",
        f"output={tmp_path}",
    ]


def _diverge_at_epoch_1(monkeypatch):
    real = VSE.train_step

    def step(self, batch, epoch):
        if epoch < 1:
            return real(self, batch, epoch)
        sims = self.models[0](batch.images, batch.tokens, batch.lengths)
        return Update({"triplet": sims.sum() * math.nan})

    monkeypatch.setattr(VSE, "train_step", step)


def test_training_stops_at_a_non_finite_loss_and_keeps_the_last_good_epoch(tmp_path, monkeypatch):
    _diverge_at_epoch_1(monkeypatch)
    with pytest.raises(DivergedError, match="the training loss became nan"):
        train_run(load_config(None, _overrides(tmp_path)), progress=False, log=lambda m: None)
    state = load_checkpoint(tmp_path / "last.pt")
    assert state["epoch"] == 1  # the first epoch finished; the diverging one wrote nothing
    assert all(torch.isfinite(w).all() for w in state["models"][0].values() if w.is_floating_point())
    assert len((tmp_path / "log.jsonl").read_text().splitlines()) == 1


def test_the_command_line_says_it_in_one_line(tmp_path, monkeypatch, capsys):
    _diverge_at_epoch_1(monkeypatch)
    assert main(["train", *_overrides(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and err[-1].startswith("mispair: error: the training loss became nan")

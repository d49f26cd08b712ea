"""The rcl recipe: its training term on a batch recomputed from the losses, the ``ratio`` of
negatives, its option checks, and a tiny noisy run."""

import json
import math

import pytest
import torch

from mispair.config import load_config
from mispair.data.loading import load_split
from mispair.engine.run import train_run
from mispair.errors import ConfigError
from mispair.losses import complementary_loss, info_nce_loss, triplet_loss
from mispair.losses.complementary import COMPLEMENTARY_KINDS
from mispair.methods.base import build_options
from mispair.methods.rcl import RCL

OPTIONS = {"tau": 0.1, "q": 0.7, "margin": 0.3}  # not the defaults: the recipe must pass them on


def _reference(sims: torch.Tensor, loss: str) -> torch.Tensor:
    """The per-sample loss the recipe's ``loss`` names, from mispair.losses."""
    if loss in COMPLEMENTARY_KINDS:
        return complementary_loss(sims, kind=loss, tau=OPTIONS["tau"], q=OPTIONS["q"])
    if loss == "tr":
        return triplet_loss(sims, OPTIONS["margin"])
    if loss == "tr-hn":
        return triplet_loss(sims, OPTIONS["margin"], negatives="hardest")
    assert loss == "cl"
    return info_nce_loss(sims, OPTIONS["tau"])


def _pair_terms(sims: torch.Tensor, tau: float) -> torch.Tensor:
    """``[B, B]`` ``−log(1 − p^{i2t}_{kj}) − log(1 − p^{t2i}_{kj})`` in float64, by the formula:
    the log-loss of anchor ``k`` contributed by negative ``j`` (both directions share ``j``)."""
    s = sims.detach().double()
    p_i2t, p_t2i = torch.softmax(s / tau, dim=1), torch.softmax(s.t() / tau, dim=1)
    return -torch.log1p(-p_i2t) - torch.log1p(-p_t2i)


def _batch_and_sims(recipe):
    batch = next(iter(recipe.context.train.batches(16, seed=0)))
    return batch, recipe.models[0](batch.images, batch.tokens, batch.lengths)


@pytest.mark.parametrize("loss", ["log", "mae", "exp", "gce", "tan", "tr", "tr-hn", "cl"])
def test_training_term_is_the_batch_mean_of_the_named_loss(make_recipe, loss):
    recipe = make_recipe("rcl", loss=loss.upper() if loss == "log" else loss, **OPTIONS)
    batch, sims = _batch_and_sims(recipe)
    terms = recipe.train_step(batch, epoch=0).terms
    assert list(terms) == [f"rcl_{loss}"]  # lower-cased, one term
    assert terms[f"rcl_{loss}"].requires_grad  # the trainer back-propagates it
    assert torch.allclose(terms[f"rcl_{loss}"], _reference(sims, loss).mean(), rtol=1e-5, atol=0)


def test_negative_learning_uses_one_negative_per_anchor(make_recipe):
    recipe = make_recipe("rcl", loss="nl", tau=0.1)
    batch, sims = _batch_and_sims(recipe)
    got = recipe.train_step(batch, epoch=0).terms["rcl_nl"]
    # anchor k's loss is the pair term of one j != k: the mean lies between the means of the
    # per-anchor smallest and largest pair terms, far below the all-negatives log loss
    terms = _pair_terms(sims, 0.1).masked_fill(torch.eye(len(batch), dtype=torch.bool), math.nan)
    low, high = terms.nan_to_num(math.inf).min(1).values, terms.nan_to_num(-math.inf).max(1).values
    assert low.mean() <= got.double() <= high.mean()
    assert got < complementary_loss(sims, kind="log", tau=0.1).mean() / 4
    assert torch.equal(recipe.train_step(batch, epoch=0).terms["rcl_nl"], got)  # reproducible


@pytest.mark.parametrize("ratio", [0.25, 0.5, 0.8])
def test_ratio_uses_floor_ratio_times_batch_negatives(make_recipe, ratio):
    recipe = make_recipe("rcl", loss="mae", ratio=ratio)
    batch = next(iter(recipe.context.train.batches(16, seed=0)))
    sims = torch.zeros(16, 16, requires_grad=True)
    recipe.models = [lambda images, tokens, lengths: sims]
    # uniform probabilities 1/B: the MAE of an anchor is (number of negatives)/B per direction
    term = recipe.train_step(batch, epoch=1).terms["rcl_mae"]
    assert term.item() == pytest.approx(2 * math.floor(ratio * 16) / 16, rel=1e-6)
    term.backward()
    assert sims.grad is not None and torch.isfinite(sims.grad).all()


@pytest.mark.parametrize("ratio", [0.25, 0.5])
def test_ratio_samples_a_subset_of_each_anchors_negatives(make_recipe, ratio):
    recipe = make_recipe("rcl", ratio=ratio, tau=0.1)
    batch, sims = _batch_and_sims(recipe)
    got = recipe.train_step(batch, epoch=2).terms["rcl_log"].double()
    count = math.floor(ratio * 16)
    terms = _pair_terms(sims, 0.1).masked_fill(torch.eye(16, dtype=torch.bool), math.nan)
    ascending = terms.nan_to_num(math.inf).sort(dim=1).values[:, :15]  # the 15 negatives
    low, high = ascending[:, :count].sum(1).mean(), ascending[:, -count:].sum(1).mean()
    assert low <= got <= high  # some `count` negatives of each anchor, shared by both directions
    full = make_recipe("rcl", tau=0.1).train_step(batch, epoch=2).terms["rcl_log"].double()
    assert torch.isclose(full, ascending.sum(1).mean(), rtol=1e-5) and got < full
    assert torch.equal(recipe.train_step(batch, epoch=2).terms["rcl_log"].double(), got)


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"loss": "hinge"}, "loss"),
        ({"loss": "ccl"}, "loss"),
        ({"ratio": 0.0}, "ratio"),
        ({"ratio": 1.5}, "ratio"),
        ({"ratio": -0.5}, "ratio"),
        ({"q": 0.0}, "q"),
        ({"q": 1.5}, "q"),
        ({"tau": 0.0}, "tau"),
    ],
)
def test_a_bad_option_is_a_config_error_naming_it(options, key):
    with pytest.raises(ConfigError, match=rf"^method\.{key}: "):
        build_options(RCL, options)


def _random_rsum(n_images: int, per_image: int) -> float:
    """Expected rSum (in %) of random scores: an image finds one of its ``per_image`` captions
    among the top K of ``n_images · per_image`` with probability 1 − C(n−c, K)/C(n, K), a caption
    its image with probability K / n_images."""
    n = n_images * per_image
    i2t = sum(1 - math.comb(n - per_image, k) / math.comb(n, k) for k in (1, 5, 10))
    t2i = sum(k / n_images for k in (1, 5, 10))
    return 100 * (i2t + t2i)


def test_tiny_rcl_run_on_noisy_pairs_learns(tmp_path):
    overrides = [
        "recipe=rcl",
        "data.source=synthetic",
        "data.synthetic_images=300",
        "data.noise.rate=0.4",
        "data.noise.protocol=pmp",
        "model.embed_dim=64",
        "model.word_dim=32",
        "train.epochs=4",
        "train.batch_size=64",
        "train.lr=2e-3",
        "train.threads=1",
        f"output={tmp_path}",
    ]
    config = load_config(None, overrides)
    summary = train_run(config, progress=False, log=lambda m: None)
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert len(log) == 4 and log[-1]["loss/rcl_log"] < log[0]["loss/rcl_log"]
    test = load_split(config.data, config.data.test_split)
    chance = _random_rsum(test.n_images, test.captions_per_image)
    assert 10 < chance < 25  # 200 test images, 5 captions each: about 16
    assert summary["test"]["rsum"] > chance + 100

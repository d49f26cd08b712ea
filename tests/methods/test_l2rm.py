"""The l2rm recipe: reconstruction, cost functions, refined alignment, rematch loss, a tiny run."""

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mispair.config import load_config
from mispair.engine.run import train_run
from mispair.errors import ConfigError
from mispair.losses.rematch import alignment_targets, rematch_loss
from mispair.methods.base import as_updates, build_options, get_recipe
from mispair.methods.l2rm import reconstruct_pairs, refined_alignment
from mispair.nn.cost_function import ExchangeableCost, LinearCost, cosine_cost


# ------------------------------------------------------------------ reconstruction (Eq. 6 data)
@pytest.mark.parametrize("n, n_pool, fraction", [(64, 64, 0.1), (20, 32, 0.5), (7, 5, 1.0), (3, 3, 0.1)])
def test_reconstruction_supervision_matches_brute_force(n, n_pool, fraction):
    images = torch.arange(n, dtype=torch.float64)[:, None, None].expand(n, 2, 3).clone()
    pool = 1000 + torch.arange(n_pool, dtype=torch.float64)[:, None, None].expand(n_pool, 2, 3)
    for seed in range(20):
        recon, sup = reconstruct_pairs(images, pool, fraction, np.random.default_rng(seed))
        assert recon.shape == pool.shape and sup.shape == (n_pool, n)
        kept = 0
        for slot in range(n_pool):
            for caption in range(n):
                holds_its_image = torch.equal(recon[slot], images[caption])
                assert sup[slot, caption] == float(holds_its_image)
            if recon[slot, 0, 0] < 1000:
                kept += 1
            else:  # not kept: the slot still holds its own pool image
                assert torch.equal(recon[slot], pool[slot])
        assert kept == int(sup.sum())
        assert 1 <= kept <= min(max(1, int(fraction * n)), n, n_pool)
        assert (sup.sum(0) <= 1).all() and (sup.sum(1) <= 1).all()


# ------------------------------------------------------------------ cost functions
def test_cost_functions_start_at_relu_one_minus_s():
    sims = torch.rand(9, 12, dtype=torch.float64) * 3 - 1.5  # some 1 − S below 0: relu matters
    expected = torch.relu(1 - sims)
    exchangeable = ExchangeableCost().double()
    linear = LinearCost(12).double()
    assert torch.allclose(exchangeable(sims), expected, rtol=1e-12)
    assert torch.allclose(linear(sims), expected, rtol=1e-12)
    assert torch.allclose(linear(sims[:, :5]), expected[:, :5], rtol=1e-12)  # a smaller batch
    assert torch.allclose(cosine_cost(sims), 1 - sims)


def _perturbed(module, seed):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return module


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 16), st.integers(2, 16), st.integers(0, 10**6))
def test_exchangeable_cost_is_permutation_equivariant(n, m, seed):
    gen = torch.Generator().manual_seed(seed)
    cost = _perturbed(ExchangeableCost().double(), seed)
    sims = torch.rand(n, m, generator=gen, dtype=torch.float64) * 2 - 1
    rows, cols = torch.randperm(n, generator=gen), torch.randperm(m, generator=gen)
    permuted_then_cost = cost(sims[rows][:, cols])
    cost_then_permuted = cost(sims)[rows][:, cols]
    assert torch.allclose(permuted_then_cost, cost_then_permuted, rtol=1e-10, atol=1e-12)
    # the whole batch reordered (image i and caption i move together)
    if n == m:
        assert torch.allclose(cost(sims[rows][:, rows]), cost(sims)[rows][:, rows], atol=1e-12)


def test_linear_cost_is_not_permutation_equivariant():
    torch.manual_seed(0)
    sims = torch.rand(8, 8, dtype=torch.float64)
    perm = torch.roll(torch.arange(8), 1)
    at_init = LinearCost(8).double()  # −I, 1: equivariant only at its initialisation
    assert torch.allclose(at_init(sims[perm][:, perm]), at_init(sims)[perm][:, perm])
    trained = _perturbed(LinearCost(8).double(), 1)
    assert not torch.allclose(trained(sims[perm][:, perm]), trained(sims)[perm][:, perm], atol=1e-3)


# ------------------------------------------------------------------ refined alignment (Eq. 7–9)
@pytest.mark.parametrize("reg", [0.01, 0.07])
@pytest.mark.parametrize("mass", [0.05, 0.1, 0.5])
def test_partial_masked_plan_satisfies_marginals(reg, mass):
    n = 32
    torch.manual_seed(1)
    sims = 0.3 + 0.4 * torch.rand(n, n, dtype=torch.float64) + 0.2 * torch.eye(n, dtype=torch.float64)
    plan = refined_alignment(torch.relu(1 - sims), reg, mass=mass, mask_positives=True, tol=1e-9)
    assert (plan >= 0).all()
    assert math.isclose(float(plan.sum()), mass, rel_tol=1e-6)
    assert (plan.sum(1) <= 1 / n + 1e-9).all() and (plan.sum(0) <= 1 / n + 1e-9).all()
    assert float(plan.diagonal().abs().max()) == 0.0  # no mass on the masked positives
    v2t, t2v = alignment_targets(plan)
    assert torch.allclose(v2t.sum(1), torch.ones(n, dtype=plan.dtype))
    assert torch.allclose(t2v.sum(1), torch.ones(n, dtype=plan.dtype))
    # the masked positive is the least likely target of its row (only the eps floor)
    assert (v2t.diagonal() <= v2t.min(1).values).all() and (t2v.diagonal() <= t2v.min(1).values).all()


def test_full_and_unmasked_plans():
    n = 16
    torch.manual_seed(2)
    cost = torch.rand(n, n, dtype=torch.float64)
    full = refined_alignment(cost, 0.05, mass=None, mask_positives=True, tol=1e-10)
    assert torch.allclose(full.sum(1), torch.full((n,), 1 / n, dtype=full.dtype), atol=1e-9)
    assert torch.allclose(full.sum(0), torch.full((n,), 1 / n, dtype=full.dtype), atol=1e-9)
    assert float(full.diagonal().abs().max()) == 0.0
    unmasked = refined_alignment(cost, 0.05, mass=0.2, mask_positives=False, tol=1e-10)
    assert math.isclose(float(unmasked.sum()), 0.2, rel_tol=1e-6)
    assert float(unmasked.diagonal().min()) > 0


# ------------------------------------------------------------------ rematch loss (Eq. 10)
def _kl(p, q):
    return sum(pi * (math.log(pi) - math.log(qi)) for pi, qi in zip(p, q))


def _brute_rematch(sims, plan, tau, kind, eps=1e-10):
    n = len(sims)
    plan = [[max(plan[i][j], eps) for j in range(n)] for i in range(n)]
    out = []
    for i in range(n):
        terms = 0.0
        for direction in ("v2t", "t2v"):
            logits = [sims[i][j] / tau if direction == "v2t" else sims[j][i] / tau for j in range(n)]
            z = sum(math.exp(v) for v in logits)
            p = [math.exp(v) / z for v in logits]
            row = [plan[i][j] if direction == "v2t" else plan[j][i] for j in range(n)]
            t = [v / sum(row) for v in row]
            if kind == "sym_kl":
                terms += 0.5 * (_kl(t, p) + _kl(p, t))
            elif kind == "kl":
                terms += _kl(t, p)
            else:
                terms += -sum(ti * math.log(pi) for ti, pi in zip(t, p))
        out.append(terms)
    return out


@pytest.mark.parametrize("kind", ["sym_kl", "kl", "infonce"])
def test_rematch_loss_matches_brute_force(kind):
    torch.manual_seed(3)
    n = 7
    sims = (torch.rand(n, n, dtype=torch.float64) * 2 - 1).requires_grad_()
    plan = torch.rand(n, n, dtype=torch.float64) / n**2
    plan.fill_diagonal_(0.0)  # a masked diagonal: the eps floor keeps it finite
    loss = rematch_loss(sims, plan, tau=0.1, kind=kind)
    expected = _brute_rematch(sims.tolist(), plan.tolist(), 0.1, kind)
    assert torch.allclose(loss, torch.tensor(expected, dtype=torch.float64), rtol=1e-5)
    loss.sum().backward()
    assert torch.isfinite(sims.grad).all()


def test_rematch_loss_closed_forms():
    zero = torch.zeros(5, 5, dtype=torch.float64)  # uniform probabilities
    uniform = torch.full((5, 5), 1 / 25, dtype=torch.float64)
    for kind in ("sym_kl", "kl"):
        assert torch.allclose(
            rematch_loss(zero, uniform, 0.05, kind=kind), torch.zeros(5, dtype=torch.float64)
        )
    entropy = torch.full((5,), 2 * math.log(5), dtype=torch.float64)
    assert torch.allclose(rematch_loss(zero, uniform, 0.05, kind="infonce"), entropy)


# ------------------------------------------------------------------ options
def test_options_reject_unknown_choices():
    cls = get_recipe("l2rm")
    assert build_options(cls, {"cost": "linear", "partial": False}).cost == "linear"
    for bad in ({"cost": "mlp"}, {"rematch": "js"}, {"rho": 0.0}, {"mask_positives": "yes"}):
        with pytest.raises(ConfigError):
            build_options(cls, bad)


def _recipe(cost="exchangeable", batch_size=32, **options):
    from mispair.config import ModelConfig
    from mispair.data.batching import TrainingPairs, encode_captions
    from mispair.data.noise import inject_noise
    from mispair.data.synthetic import make_synthetic
    from mispair.data.vocab import Vocabulary
    from mispair.methods.base import RecipeContext
    from mispair.nn.assembly import build_model

    pairs = make_synthetic(30, 5, seed=0)
    vocab = Vocabulary.build(pairs.captions, 1)
    noise = inject_noise(30, 5, 0.4, "pmp", seed=0)
    train = TrainingPairs(pairs, encode_captions(pairs, vocab), noise.image_of_caption)
    context = RecipeContext(train, batch_size, 3, torch.device("cpu"), 0, noise=noise)
    torch.manual_seed(0)
    cfg = ModelConfig(embed_dim=32, word_dim=16)
    models = [build_model(cfg, pairs.feature_dim, len(vocab))]
    cls = get_recipe("l2rm")
    return cls(models, build_options(cls, {"cost": cost, "warmup_epochs": 1, **options}), context)


@pytest.mark.parametrize("cost", ["exchangeable", "linear", "cosine"])
def test_recipe_epoch_steps_and_state_round_trip(cost):
    recipe = _recipe(cost)
    assert recipe.begin_epoch(0) == {}
    assert len(list(recipe.epoch_batches(0, seed=1))) == recipe.n_steps(0)
    values = recipe.begin_epoch(1)
    assert {"division/auc", "division/clean_fraction"} <= set(values)
    items = list(recipe.epoch_batches(1, seed=1))
    assert len(items) == recipe.n_steps(1) == -(-int(recipe.matched().sum()) // 32)
    before = [p.detach().clone() for p in recipe.cost_fn.parameters()] if recipe.cost_fn else []
    for item in items:  # the last matched batch is smaller than the batch size
        terms = {}
        for update in as_updates(recipe.train_step(item, 1)):
            if update.optimizer == "cost":  # step it as the trainer does
                assert set(update.terms) == {"cost_ot"} and not terms
                _step_cost(recipe, update.terms["cost_ot"])
            else:
                assert "cost_ot" not in update.terms
            terms |= update.terms
        assert {"triplet", "rematch"} <= set(terms) and all(torch.isfinite(v) for v in terms.values())
        assert terms["rematch"].requires_grad
    if cost == "exchangeable":  # one Adam step per batch moved every parameter
        assert all(not torch.equal(a, b) for a, b in zip(before, recipe.cost_fn.parameters()))
    assert ("cost_ot" in terms) == (cost != "cosine")
    state = recipe.state_dict()
    fresh = _recipe(cost)
    fresh.load_state_dict(state)
    assert np.array_equal(fresh.clean_prob, recipe.clean_prob)
    if recipe.cost_fn is not None:
        for a, b in zip(fresh.cost_fn.parameters(), recipe.cost_fn.parameters()):
            assert torch.equal(a, b)
        assert fresh.cost_optimizer.state_dict()["state"].keys() == state["cost_optimizer"]["state"].keys()


def _step_cost(recipe, loss):
    """The trainer's step of the cost optimizer; Eq. 6's loss reaches the cost function only."""
    optimizer = recipe.optimizers()["cost"]
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    assert all(p.grad is None for p in recipe.models[0].parameters())
    optimizer.step()


def test_collapsed_division_keeps_the_previous_one(monkeypatch):
    from mispair.division import Division
    from mispair.methods import l2rm as l2rm_module

    recipe = _recipe()
    recipe.begin_epoch(1)
    previous = recipe.clean_prob.copy()
    monkeypatch.setattr(l2rm_module, "fit_bmm", lambda losses: Division(np.zeros(len(losses))))
    values = recipe.begin_epoch(2)
    assert values["division/kept_previous"] == 1.0
    assert np.array_equal(recipe.clean_prob, previous) and recipe.n_steps(2) > 0
    fresh = _recipe()  # no division yet: every pair is matched
    assert fresh.begin_epoch(1)["division/clean_fraction"] == 1.0 and fresh.clean_prob is None


def test_mask_auto_follows_the_noise_record():
    recipe = _recipe()
    assert recipe.mask_positives()
    recipe.context.noise = None  # a split taken as clean (e.g. CC152K): D.1 / the reference
    assert not recipe.mask_positives()
    assert _recipe(mask_positives=True).mask_positives()


# ------------------------------------------------------------------ tiny run
def _tiny(tmp_path, recipe, *extra):
    overrides = [
        f"recipe={recipe}",
        "data.source=synthetic",
        "data.synthetic_images=400",
        "data.noise.rate=0.6",
        "data.noise.protocol=pmp",
        "model.embed_dim=64",
        "model.word_dim=32",
        "train.epochs=6",
        "train.batch_size=64",
        "train.threads=1",
        "train.seed=0",
        f"output={tmp_path / recipe}",
        *extra,
    ]
    return train_run(load_config(None, overrides), progress=False, log=lambda m: None)


@pytest.mark.slow  # twins by default: test_single_process_unchanged.py[l2rm] (every number), test_distributed
def test_tiny_l2rm_run_beats_vse_under_60_percent_noise(tmp_path):
    vse = _tiny(tmp_path, "vse")
    l2rm = _tiny(tmp_path, "l2rm", "method.warmup_epochs=2")
    log = [json.loads(line) for line in (tmp_path / "l2rm" / "log.jsonl").read_text().splitlines()]
    assert "division/auc" not in log[0] and "loss/warmup_infonce_rce" in log[0]
    assert {"loss/triplet", "loss/rematch", "loss/cost_ot"} <= set(log[-1])
    assert log[-1]["division/auc"] > 0.85
    # the default cost_lr moves the learned cost measurably away from relu(1 − S)
    assert all("cost/drift_mean" in row for row in log) and log[-1]["cost/drift_mean"] > 0.02
    assert l2rm["test"]["rsum"] > vse["test"]["rsum"] + 50


def test_cost_drift_matches_a_loop():
    from mispair.nn.cost_function import cost_drift

    assert cost_drift(ExchangeableCost(), 6) == {
        "cost/drift_mean": 0.0,
        "cost/drift_max": 0.0,
        "cost/w0": -1.0,
        "cost/w1": 0.0,
        "cost/w2": 0.0,
        "cost/w3": 0.0,
        "cost/b": 1.0,
    }
    cost = _perturbed(ExchangeableCost().double(), seed=3)
    sims = torch.rand(6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)  # as cost_drift
    w, b = cost.weight.tolist(), cost.bias.item()
    deltas = []
    for i in range(6):
        for j in range(6):
            pre = (
                w[0] * sims[i, j] + w[1] * sims[i].mean() + w[2] * sims[:, j].mean() + w[3] * sims.mean() + b
            )
            deltas.append(abs(max(float(pre), 0.0) - max(1 - float(sims[i, j]), 0.0)))
    values = cost_drift(cost, 6)
    assert values["cost/drift_mean"] == pytest.approx(np.mean(deltas), rel=1e-9)
    assert values["cost/drift_max"] == pytest.approx(max(deltas), rel=1e-9)
    assert cost_drift(LinearCost(6), 6) == {"cost/drift_mean": 0.0, "cost/drift_max": 0.0}


def test_cost_function_has_its_own_rate_and_schedule():
    recipe = _recipe(cost_lr=0.01, cost_lr_decay_epochs=[2], cost_lr_decay=0.5)
    rates = []
    for epoch in range(4):
        recipe.begin_epoch(epoch)
        rates.append(recipe.cost_optimizer.param_groups[0]["lr"])
    assert rates == pytest.approx([0.01, 0.01, 0.005, 0.005])
    assert recipe.end_epoch(0)["cost/drift_mean"] == 0.0  # nothing trained yet

"""``method.loss=infonce`` of the seed recipes (ncr, asl, pc2, l2rm): each pair's InfoNCE weighted
by the recipe's own trust in it, against a loop over a tiny batch."""

import numpy as np
import pytest
import torch

from tests.losses.test_soft_pair import loop_info_nce

TAU = 0.2


def _batch(recipe, index):
    return recipe.context.train.batch(np.asarray(index))


def _sims(model, batch):
    return model(batch.images, batch.tokens, batch.lengths).double()


def _cotrain_recipe(make_recipe, name, **options):
    recipe = make_recipe(name, warmup_epochs=0, loss="infonce", **options)
    n = len(recipe.context.train)
    recipe.clean_prob = np.random.default_rng(0).random((2, n))
    return recipe


def _expected(recipe, k, batch, weight_of):
    """The mean over the batch of ``weight_of(ŷ) · InfoNCE_i`` with NCR's target
    ``ŷ = w + (1 − w) p``, ``w`` the other model's clean probability (co-divide)."""
    w = torch.as_tensor(recipe.clean_prob[1 - k][batch.index.numpy()], dtype=torch.float64)
    p = recipe.predict(recipe.models[k], batch).double()
    target = w + (1 - w) * p
    losses = loop_info_nce(_sims(recipe.models[k], batch), TAU)
    return sum(weight_of(t) * x for t, x in zip(target.tolist(), losses.tolist())) / len(batch)


@pytest.mark.parametrize(
    "name, weight_of",
    [
        ("ncr", lambda t: (10**t - 1) / 9),  # the soft margin's fraction of α (m = 10)
        ("asl", lambda t: (3 ** min(max(t, 0.0), 1.0) - 1) / 2),  # the soft boundary σ (z = 3)
    ],
)
@pytest.mark.parametrize("k", [0, 1])
def test_labeled_pairs_train_the_weighted_infonce(make_recipe, name, weight_of, k):
    recipe = _cotrain_recipe(make_recipe, name)
    batch = _batch(recipe, [0, 4, 9, 17, 33, 60, 101])
    terms = recipe.cotrain_loss(k, batch, None, epoch=0)
    assert terms["labeled"].item() == pytest.approx(_expected(recipe, k, batch, weight_of), rel=1e-5)


def test_ncr_unlabeled_pairs_take_the_averaged_prediction(make_recipe):
    recipe = _cotrain_recipe(make_recipe, "ncr")
    labeled, unlabeled = _batch(recipe, [1, 2, 3, 5]), _batch(recipe, [7, 40, 80, 120, 140])
    assert recipe.use_unlabeled(3)
    terms = recipe.cotrain_loss(0, labeled, unlabeled, epoch=3)
    target = sum(recipe.predict(m, unlabeled).double() for m in recipe.models) / 2
    losses = loop_info_nce(_sims(recipe.models[0], unlabeled), TAU)
    expected = float(((10**target - 1) / 9 * losses).mean())
    assert terms["unlabeled"].item() == pytest.approx(expected, rel=1e-5)


def test_pc2_clean_pairs_train_the_infonce_weighted_by_the_rectified_margin(make_recipe):
    recipe = _cotrain_recipe(make_recipe, "pc2", pseudo_captioning=False)
    n = len(recipe.context.train)
    recipe.oscillation_prob = np.random.default_rng(1).random((2, n))
    batch = _batch(recipe, [2, 8, 21, 55, 89, 144])
    terms = recipe.cotrain_loss(0, batch, None, epoch=0)
    expected = []
    for i, loss in zip(batch.index.tolist(), loop_info_nce(_sims(recipe.models[0], batch), TAU).tolist()):
        w_c, w_o = recipe.clean_prob[1][i], recipe.oscillation_prob[1][i]
        exponent = w_c + (1 - w_c) * (w_o if w_o > 0.5 else 0.0)  # PC² Eq. 8
        expected.append((10**exponent - 1) / 9 * loss)
    assert terms["clean"].item() == pytest.approx(float(np.mean(expected)), rel=1e-5)
    assert {"pseudo_cls", "balance"} <= set(terms)  # P-Cls unchanged


@pytest.mark.parametrize("name", ["ncr", "asl", "pc2"])
def test_fully_trusted_pairs_and_the_warmup_train_the_plain_infonce(make_recipe, name):
    recipe = _cotrain_recipe(make_recipe, name, pseudo_captioning=False) if name == "pc2" else None
    recipe = recipe or _cotrain_recipe(make_recipe, name)
    recipe.clean_prob[:] = 1.0
    batch = _batch(recipe, [0, 10, 20, 30, 40, 50])
    plain = float(loop_info_nce(_sims(recipe.models[0], batch), TAU).mean())
    terms = recipe.cotrain_loss(0, batch, None, epoch=0)
    assert terms["clean" if name == "pc2" else "labeled"].item() == pytest.approx(plain, rel=1e-5)
    assert recipe.warmup_loss(recipe.models[0], batch).item() == pytest.approx(plain, rel=1e-5)


def test_the_default_loss_is_still_the_papers(make_recipe):
    for name, default in (("ncr", "triplet"), ("asl", "asymmetric"), ("pc2", "triplet"), ("l2rm", "triplet")):
        assert make_recipe(name).options.loss == default


def test_l2rm_matched_pairs_train_the_plain_infonce_at_loss_tau(make_recipe):
    recipe = make_recipe("l2rm", cost="cosine", loss="infonce", loss_tau=TAU)
    assert recipe.options.tau == 0.05  # the warm-up's and the rematch's temperature is untouched
    batch = _batch(recipe, [3, 6, 12, 24, 48, 96])
    terms = recipe.model_terms(batch, _batch(recipe, [5, 7, 11, 13]))
    plain = float(loop_info_nce(_sims(recipe.models[0], batch), TAU).mean())
    assert set(terms) == {"infonce", "rematch"}
    assert terms["infonce"].item() == pytest.approx(plain, rel=1e-5)


def test_vse2_trains_two_models_and_tests_their_average(tmp_path):
    from mispair.config import load_config
    from mispair.engine.run import train_run
    from mispair.engine.trained import TrainedRun
    from tests.engine.tiny_runs import BASE

    config = load_config(None, [*BASE, "recipe=vse2", "method.loss=infonce", "train.epochs=1"])
    config.output = str(tmp_path)
    train_run(config, progress=False, log=lambda _: None)
    run = TrainedRun.open(tmp_path / "best.pt")
    assert len(run.models) == 2
    first, second = (dict(m.named_parameters()) for m in run.models)
    assert any(not torch.equal(first[k], second[k]) for k in first)  # two initialisations
    logged = (tmp_path / "log.jsonl").read_text()
    assert '"loss/infonce_0"' in logged and '"loss/infonce_1"' in logged

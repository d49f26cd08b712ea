"""The ``holdout`` recipe: its division comes from the run's held-out scores alone (never from its
own models), split at ``division.p_threshold``, and it trusts each pair by that division.

Fold assignment by image and "no pair scored by a model that trained on it" are tested where the
scores are made (tests/engine/test_pair_scores.py); here, the recipe that reads them."""

import copy

import numpy as np
import pytest
import torch
from sklearn.mixture import GaussianMixture

from mispair.errors import ConfigError
from mispair.losses import info_nce_loss
from mispair.methods.base import build_options, get_recipe


def _bimodal(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Held-out scores of ``n`` pairs: the first 60% matched (high), the rest mismatched (low)."""
    rng = np.random.default_rng(seed)
    matched = np.arange(n) < int(0.6 * n)
    return np.where(matched, rng.normal(0.8, 0.05, n), rng.normal(0.2, 0.05, n)), matched


@pytest.fixture
def holdout(make_recipe):
    """``holdout(scores=None, p_threshold=0.5, **options)``: the recipe on the synthetic set of
    ``make_recipe``, its context holding ``scores`` (default: :func:`_bimodal`)."""

    def build(scores=None, p_threshold=0.5, **options):
        vse = make_recipe("vse")
        context = vse.context
        context.pair_scores = _bimodal(len(context.train))[0] if scores is None else scores
        context.p_threshold = p_threshold
        cls = get_recipe("holdout")
        models = [vse.models[0], copy.deepcopy(vse.models[0])]
        return cls(models, build_options(cls, options), context)

    return build


def test_holdout_needs_held_out_scores(make_recipe):
    with pytest.raises(ConfigError, match="needs held-out pair scores"):
        make_recipe("holdout")


def test_the_division_is_the_two_component_mixture_of_the_held_out_scores(holdout):
    recipe = holdout()
    scores = recipe.context.pair_scores
    # reference: scikit-learn's GMM on the same normalised suspicion; its low-mean component is clean
    suspicion = -scores
    suspicion = ((suspicion - suspicion.min()) / (suspicion.max() - suspicion.min()))[:, None]
    gmm = GaussianMixture(2, random_state=0, tol=1e-6, max_iter=500, reg_covar=5e-4).fit(suspicion)
    reference = gmm.predict_proba(suspicion)[:, int(np.argmin(gmm.means_[:, 0]))]
    assert np.abs(recipe.clean_prob - reference).max() < 0.05
    _, matched = _bimodal(len(scores))
    assert np.array_equal(recipe.clean_prob > 0.5, matched)


def test_the_division_ignores_the_models(holdout):
    first, second = holdout(), holdout()
    with torch.no_grad():
        for p in second.models[0].parameters():
            p.add_(1.0)
    assert np.array_equal(first.clean_prob, second.clean_prob)


@pytest.mark.parametrize("p_threshold", [0.05, 0.5, 0.95])
def test_the_split_is_at_the_divisions_threshold(holdout, p_threshold):
    recipe = holdout(p_threshold=p_threshold, weighting="hard")
    values = recipe.begin_epoch(0)
    clean = recipe.clean_prob > p_threshold
    assert values["division/clean_fraction"] == pytest.approx(clean.mean())
    truth = ~recipe.context.noise.is_noisy
    assert values["division/precision"] == pytest.approx((clean & truth).sum() / max(clean.sum(), 1))
    batch = recipe.context.train.batch(np.arange(16))
    assert torch.equal(recipe.trust(batch), torch.as_tensor(clean[:16], dtype=torch.float32))


def test_a_pair_is_pulled_together_by_its_trust_only(holdout):
    recipe = holdout(loss="infonce", suspect_loss="none", tau=0.2)
    batch = recipe.context.train.batch(np.arange(16))
    trust = recipe.trust(batch)
    assert torch.equal(trust, torch.as_tensor(recipe.clean_prob[:16], dtype=torch.float32))
    model = recipe.models[0]
    terms = recipe.model_terms(0, batch, trust, epoch=0)
    sims = model(batch.images, batch.tokens, batch.lengths)
    per_pair = info_nce_loss(sims, 0.2).detach()
    expected = sum(float(trust[i]) * float(per_pair[i]) for i in range(16)) / 16  # reduction: mean
    assert set(terms) == {"trusted"}
    assert float(terms["trusted"].detach()) == pytest.approx(expected, rel=1e-5)


def test_with_q_the_trusted_term_is_the_generalized_cross_entropy_of_each_direction(holdout):
    recipe = holdout(loss="infonce", suspect_loss="none", tau=0.2, q=0.5)
    batch = recipe.context.train.batch(np.arange(16))
    trust = recipe.trust(batch)
    terms = recipe.model_terms(0, batch, trust, epoch=0)
    sims = recipe.models[0](batch.images, batch.tokens, batch.lengths).detach()
    p_i2t = torch.softmax(sims / 0.2, dim=1).diagonal()
    p_t2i = torch.softmax(sims / 0.2, dim=0).diagonal()
    per_pair = (1 - p_i2t**0.5) / 0.5 + (1 - p_t2i**0.5) / 0.5
    assert float(terms["trusted"].detach()) == pytest.approx(float((trust * per_pair).mean()), rel=1e-5)


@pytest.mark.parametrize("q", [-0.1, 1.5])
def test_a_q_outside_0_1_is_a_one_line_config_error(holdout, q):
    with pytest.raises(ConfigError, match=r"method\.q: in \[0, 1\]"):
        holdout(q=q)


def test_suspected_pairs_train_against_targets_built_from_the_other_models_memory(holdout):
    """IN2R in ``holdout``: each model admits its trusted pairs above the admission bar to its own
    memory, and its suspected pairs are trained against targets built from the other model's
    memory (recomputed here by hand from the parts)."""
    from mispair.losses.neighbour_targets import nearest_partners, neighbour_target_loss

    rng = np.random.default_rng(0)
    n = len(holdout().context.train)
    overlapping = np.where(np.arange(n) < 0.6 * n, rng.normal(0.6, 0.15, n), rng.normal(0.3, 0.1, n))
    recipe = holdout(
        scores=overlapping, suspect_loss="neighbours", suspect_weight=1.0, neighbours=3, neighbour_tau=0.2
    )
    suspected = recipe.clean_prob <= 0.5
    assert recipe.admit_above == pytest.approx(recipe.clean_prob[~suspected].mean())
    batch = recipe.context.train.batch(np.arange(32))
    trust = recipe.trust(batch)
    first = recipe.model_terms(0, batch, trust, epoch=0)  # model 1's memory is still empty
    assert float(first["neighbours"]) == 0.0
    admitted = (trust > recipe.admit_above).sum()
    assert len(recipe.memories[0]) == admitted > 0
    recipe.model_terms(1, batch, trust, epoch=0)  # fills model 1's memory
    refiners = [r.eval() for r in recipe.refiners[0]]  # no dropout, so the terms are reproducible
    terms = recipe.model_terms(0, batch, trust, epoch=0)
    model = recipe.models[0]
    images = model.encode_images(batch.images).pooled
    texts = model.encode_texts(batch.tokens, batch.lengths).pooled
    rows = torch.as_tensor(suspected[:32])
    memory_images, memory_texts = recipe.memories[1].rows()
    to_text, to_image = refiners
    expected = (
        neighbour_target_loss(
            images[rows], to_text(nearest_partners(images[rows], memory_images, memory_texts, 3)), 0.2
        )
        + neighbour_target_loss(
            texts[rows], to_image(nearest_partners(texts[rows], memory_texts, memory_images, 3)), 0.2
        )
    ) / 2
    assert float(terms["neighbours"].detach()) == pytest.approx(float(expected.detach().sum()) / 32, rel=1e-5)
    assert "suspected" not in terms


def test_the_refiners_are_trained_and_kept_with_the_recipe(holdout):
    recipe = holdout(suspect_loss="neighbours", suspect_weight=1.0)
    trained = {id(p) for g in recipe.param_groups(1e-3) for p in g["params"]}
    assert all(id(p) in trained for p in recipe.refiners.parameters())
    batch = recipe.context.train.batch(np.arange(32))
    recipe.train_step(batch, epoch=0)
    state = recipe.state_dict()
    again = holdout(suspect_loss="neighbours", suspect_weight=1.0)
    again.load_state_dict(state)
    assert [len(m) for m in again.memories] == [len(m) for m in recipe.memories]
    for a, b in zip(again.refiners.parameters(), recipe.refiners.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("option", ["neighbours=0", "memory_size=0", "neighbour_tau=0"])
def test_a_bad_neighbour_option_is_a_one_line_config_error(holdout, option):
    key, value = option.split("=")
    with pytest.raises(ConfigError, match=f"method.{key}"):
        holdout(suspect_loss="neighbours", **{key: float(value) if key == "neighbour_tau" else int(value)})

"""Linear backbones run together (``nn/linear_backbone.py``): every model's similarities of a batch
at once equal each model's own forward, the losses read the stack as each matrix alone, and
``holdout`` steps its two models together with the terms and gradients of the step model by model."""

import numpy as np
import pytest
import torch

import mispair.methods.holdout as holdout_module
from mispair.config import ModelConfig
from mispair.data.batching import TrainingPairs, encode_captions
from mispair.data.noise import inject_noise
from mispair.data.synthetic import make_synthetic
from mispair.data.vocab import Vocabulary
from mispair.losses import complementary_loss, info_nce_loss
from mispair.losses.complementary import COMPLEMENTARY_KINDS
from mispair.methods.base import RecipeContext, build_options, get_recipe
from mispair.nn.assembly import build_model
from mispair.nn.linear_backbone import is_linear_backbone, run_together, stacked_similarities
from mispair.nn.text import state_cache
from mispair.nn.text.minilm import _frozen_cache
from tests.tolerances import float32_close

BACKBONE = {"head": "cosine", "text_encoder": "minilm", "image_pooling": "features", "embed_dim": 32}


@pytest.fixture
def collection(monkeypatch):
    """30 images × 5 captions (40% swapped) whose captions have random frozen MiniLM vectors in a
    cache of this test alone."""
    monkeypatch.setattr(state_cache, "_CACHES", {})
    pairs = make_synthetic(30, 5, seed=0)
    vocab = Vocabulary.build(pairs.captions, 1)
    tokens = encode_captions(pairs, vocab)
    generator = torch.Generator().manual_seed(0)
    for precision in ("float32", "bfloat16"):
        _frozen_cache(False, precision).fill(
            tokens, lambda t, _: torch.randn(len(t), 1, 384, generator=generator)
        )
    noise = inject_noise(30, 5, 0.4, "pmp", seed=0)
    return TrainingPairs(pairs, tokens, noise.image_of_caption), len(vocab)


def _models(train, vocab_size, count=2, **changes):
    torch.manual_seed(0)
    config = ModelConfig(**{**BACKBONE, "text_precision": "float32", **changes})
    return [build_model(config, train.pairs.feature_dim, vocab_size) for _ in range(count)]


def test_the_stacked_similarities_equal_each_models_own_forward(collection):
    train, vocab_size = collection
    models = _models(train, vocab_size, count=3)
    batch = train.batch(np.arange(20))
    stacked = stacked_similarities(models, batch.images, batch.tokens, batch.lengths)
    assert stacked.shape == (3, 20, 20)
    for k, model in enumerate(models):
        alone = model(batch.images, batch.tokens, batch.lengths)
        assert torch.allclose(stacked[k], alone, atol=1e-6)


@pytest.mark.parametrize(
    "changes",
    [
        {"image_pooling": "fragments"},
        {"head": "sgr"},
        {"text_encoder": "bigru", "word_dim": 16},
        {"image_mlp": True},
    ],
)
def test_only_linear_backbones_run_together(collection, changes):
    train, vocab_size = collection
    assert run_together(_models(train, vocab_size))
    other = _models(train, vocab_size, **changes)
    assert not is_linear_backbone(other[0]) and not run_together(other)


def test_models_with_a_frozen_map_or_other_caption_vectors_do_not_run_together(collection):
    train, vocab_size = collection
    frozen = _models(train, vocab_size)
    frozen[1].text_encoder.fc.weight.requires_grad_(False)
    assert not run_together(frozen)
    mixed = [_models(train, vocab_size)[0], _models(train, vocab_size, text_precision="bfloat16")[0]]
    assert all(is_linear_backbone(m) for m in mixed) and not run_together(mixed)  # two caches


@pytest.mark.parametrize("kind", COMPLEMENTARY_KINDS)
def test_the_losses_of_a_stack_are_those_of_each_matrix_alone(kind):
    sims = torch.rand(3, 9, 9, generator=torch.Generator().manual_seed(1)) * 2 - 1
    sims[1, 2, 2] = 0.999  # a near-certain match, where log(1 - p) needs care
    sims.requires_grad_()
    stacked = info_nce_loss(sims, 0.1) + complementary_loss(sims, kind=kind, tau=0.1)
    alone = torch.stack([info_nce_loss(s, 0.1) + complementary_loss(s, kind=kind, tau=0.1) for s in sims])
    assert stacked.shape == (3, 9) and torch.allclose(stacked, alone, atol=1e-6)
    (grad,) = torch.autograd.grad(stacked.sum(), sims)
    (reference,) = torch.autograd.grad(alone.sum(), sims)
    assert torch.allclose(grad, reference, atol=1e-6)


def _holdout(train, models, **options):
    context = RecipeContext(train, 16, 4, torch.device("cpu"), 0, noise=None)
    rng = np.random.default_rng(0)
    context.pair_scores = np.where(
        np.arange(len(train)) < 90, rng.normal(0.8, 0.05, 150), rng.normal(0.2, 0.05, 150)
    )
    cls = get_recipe("holdout")
    return cls(models, build_options(cls, options), context)


def _step(recipe, together):
    recipe.__dict__["together"] = together  # the path the recipe would not take by itself
    for model in recipe.models:
        model.zero_grad(set_to_none=True)
    batch = recipe.context.train.batch(np.arange(16, 40))
    terms = recipe.train_step(batch, 0).terms
    sum(terms.values()).backward()
    grads = [p.grad.clone() for m in recipe.models for p in m.parameters() if p.requires_grad]
    return {k: float(v.detach()) for k, v in terms.items()}, grads


@pytest.mark.parametrize("suspect_loss", ["complementary", "none"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_holdout_steps_its_linear_models_together_with_the_terms_and_gradients_of_each_alone(
    collection, suspect_loss, reduction, monkeypatch
):
    train, vocab_size = collection
    calls = []

    def counted(*args):
        calls.append(len(args[0]))
        return stacked_similarities(*args)

    monkeypatch.setattr(holdout_module, "stacked_similarities", counted)
    recipe = _holdout(train, _models(train, vocab_size), suspect_loss=suspect_loss, reduction=reduction)
    assert recipe.together
    together, together_grads = _step(recipe, True)
    alone, alone_grads = _step(recipe, False)
    assert calls == [2]  # the first step took the stacked path, the second each model's own
    assert list(together) == list(alone)  # trusted_0, suspected_0, trusted_1, ...
    assert together == pytest.approx(alone, rel=1e-5)
    batch = 24  # each gradient entry sums a batch's [B, B] similarities' contributions
    assert all(float32_close(a, b, terms=batch * batch) for a, b in zip(together_grads, alone_grads))


@pytest.mark.parametrize(
    "options", [{"loss": "triplet"}, {"suspect_loss": "neighbours"}, {"loss": "asymmetric"}]
)
def test_holdout_steps_model_by_model_where_the_terms_read_each_models_embeddings(collection, options):
    train, vocab_size = collection
    assert not _holdout(train, _models(train, vocab_size), **options).together

"""PC²: brute-force checks of Eq. 2–9 and a tiny noisy run against the plain baseline."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from mispair.config import ModelConfig, load_config
from mispair.data.batching import TrainingPairs, encode_captions
from mispair.data.synthetic import make_synthetic
from mispair.data.vocab import Vocabulary
from mispair.engine.run import train_run
from mispair.errors import ConfigError
from mispair.losses import (
    balance_loss,
    pseudo_classification_loss,
    pseudo_pair_loss,
    rectified_target,
    triplet_loss,
)
from mispair.methods.base import RecipeContext, build_options
from mispair.methods.pc2 import PC2, assign_pseudo_captions
from mispair.nn.assembly import build_model


def _recipe(n_images=24, **options) -> PC2:
    torch.manual_seed(0)
    pairs = make_synthetic(n_images, 2, seed=0)
    pairs.image_meta["category"] = [i % 3 for i in range(n_images)]
    vocab = Vocabulary.build(pairs.captions, 1)
    train = TrainingPairs(pairs, encode_captions(pairs, vocab))
    context = RecipeContext(
        train=train, batch_size=8, epochs=4, device=torch.device("cpu"), seed=0, eval_batch_size=16
    )
    config = ModelConfig(embed_dim=16, word_dim=8)
    models = [build_model(config, pairs.feature_dim, len(vocab)) for _ in range(2)]
    return PC2(models, build_options(PC2, {"n_classes": 6, **options}), context)


def _division():
    import mispair.division as division

    if not hasattr(division, "oscillation_scores"):
        pytest.skip("mispair.division (fit_gmm, oscillation_scores) not there yet")
    return division


def _cos(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_pseudo_caption_assignment_is_argmax_of_eq4():
    noisy, clean = torch.rand(7, 5, dtype=torch.float64), torch.rand(9, 5, dtype=torch.float64)
    index, similarity = assign_pseudo_captions(noisy, clean)
    for i in range(7):
        scores = [_cos(noisy[i].numpy(), clean[b].numpy()) for b in range(9)]
        assert index[i] == int(np.argmax(scores))
        assert math.isclose(similarity[i].item(), max(scores), rel_tol=1e-12)


def test_pseudo_classification_loss_is_eq2():
    image_logits = torch.randn(6, 4, dtype=torch.float64)
    text_logits = torch.randn(6, 4, dtype=torch.float64)
    loss = pseudo_classification_loss(image_logits, text_logits)
    for i in range(6):
        label = int(np.argmax(text_logits[i].numpy()))
        p = np.exp(image_logits[i].numpy()) / np.exp(image_logits[i].numpy()).sum()
        assert math.isclose(loss[i].item(), -math.log(p[label]), rel_tol=1e-12)


def test_balance_term_is_eq3_and_spreads():
    probs = torch.softmax(torch.randn(5, 4, dtype=torch.float64) * 3, dim=1)
    mean = probs.numpy().mean(axis=0)
    expected = float((mean * np.log(mean)).sum())
    assert math.isclose(balance_loss(probs).item(), expected, rel_tol=1e-12)
    per_sample = np.mean([(p * np.log(p)).sum() for p in probs.numpy()])  # the reference's variant
    assert math.isclose(balance_loss(probs, "sample").item(), per_sample, rel_tol=1e-12)

    def mean_entropy(logits):
        m = logits.softmax(dim=1).mean(dim=0)
        return float(-(m * m.log()).sum())

    torch.manual_seed(0)
    logits = torch.randn(16, 8, dtype=torch.float64)
    logits[:, 0] += 3  # most predictions in class 0
    entropies = [mean_entropy(logits)]
    for _ in range(30):  # gradient descent on Eq. 3 alone
        logits.requires_grad_(True)
        (grad,) = torch.autograd.grad(balance_loss(logits.softmax(dim=1)), logits)
        logits = (logits - 2.0 * grad).detach()
        entropies.append(mean_entropy(logits))
    assert all(b > a for a, b in itertools.pairwise(entropies))
    assert entropies[-1] > entropies[0] + 0.3 and entropies[-1] <= math.log(8)


def test_pseudo_pair_loss_excludes_a_shared_caption():
    sims = torch.rand(5, 5, dtype=torch.float64)
    lender = torch.tensor([2, 0, 2, 1, 0])
    margins = torch.rand(5, dtype=torch.float64) * 0.2
    loss = pseudo_pair_loss(sims, lender, margins)
    for i in range(5):
        negatives = [k for k in range(5) if lender[k] != lender[i]]
        i2t = max(max(0.0, margins[i] - sims[i, i] + sims[i, k]) for k in negatives)
        t2i = max(max(0.0, margins[i] - sims[i, i] + sims[k, i]) for k in negatives)
        assert math.isclose(loss[i].item(), float(i2t + t2i), rel_tol=1e-12)
    sims.requires_grad_(True)  # one caption lent to all: no negatives, zero loss, finite gradient
    loss = pseudo_pair_loss(sims, torch.zeros(5, dtype=torch.long), margins).sum()
    loss.backward()
    assert loss.item() == 0 and torch.isfinite(sims.grad).all()


def test_pseudo_caption_loss_matches_eq4_to_eq6_by_hand():
    recipe = _recipe()
    train, model, classifier = recipe.context.train, recipe.models[0], recipe.classifiers[0]
    labeled, noisy = train.batch(np.arange(0, 8)), train.batch(np.arange(20, 26))
    images = model.encode_images(labeled.images)
    texts = model.encode_texts(labeled.tokens, labeled.lengths)
    loss = recipe.pseudo_caption_loss(0, images, texts, labeled, noisy)
    with torch.no_grad():
        noisy_images = model.encode_images(noisy.images)
        p_n = classifier(noisy_images.pooled).softmax(dim=1).numpy()
        p_c = classifier(images.pooled).softmax(dim=1).numpy()
        lender = [int(np.argmax([_cos(p, q) for q in p_c])) for p in p_n]
        similarity = [_cos(p_n[i], p_c[j]) for i, j in enumerate(lender)]
        margins = [0.2 * (10**s - 1) / 9 for s in similarity]  # Eq. 5
        sims = model.similarity(noisy_images, texts[torch.tensor(lender)]).numpy()
    expected = 0.0
    for i in range(6):
        negatives = [k for k in range(6) if lender[k] != lender[i]]
        expected += max([0.0] + [margins[i] - sims[i, i] + sims[i, k] for k in negatives])
        expected += max([0.0] + [margins[i] - sims[i, i] + sims[k, i] for k in negatives])
    assert math.isclose(loss.item(), expected, rel_tol=1e-5)
    loss.backward()  # gradients reach the encoders through the lent captions
    grads = [p.grad for p in model.text_encoder.parameters() if p.grad is not None]
    assert any(g.abs().sum() > 0 for g in grads)
    # the category proxy: lender image vs noisy image category
    category = train.pairs.image_meta["category"]
    same = np.mean(
        [category[noisy.image_index[i]] == category[labeled.image_index[j]] for i, j in enumerate(lender)]
    )
    log = recipe._caption_log()
    assert math.isclose(log["pseudo_caption/0/category_match"], same)
    assert "pseudo_caption/1/similarity" not in log and recipe._caption_log() == {}


def test_clean_margin_is_eq8_by_hand():
    recipe = _recipe()
    n = len(recipe.context.train)
    rng = np.random.default_rng(0)
    recipe.clean_prob, recipe.oscillation_prob = rng.random((2, n)), rng.random((2, n))
    batch = recipe.context.train.batch(np.array([3, 7, 11, 30, 41]))
    for k in range(2):
        margins = recipe.clean_margins(k, batch)
        for b, i in enumerate(batch.index.tolist()):
            w_c, w_o = recipe.clean_prob[1 - k][i], recipe.oscillation_prob[1 - k][i]  # co-divided
            exponent = w_c + (1 - w_c) * (1.0 if w_o > 0.5 else 0.0) * w_o
            assert math.isclose(margins[b].item(), 0.2 * (10**exponent - 1) / 9, rel_tol=1e-5)
    recipe.options.rectification = False
    w_c = recipe.clean_prob[1][batch.index.numpy()]
    assert np.allclose(recipe.clean_margins(0, batch).numpy(), 0.2 * (10**w_c - 1) / 9, rtol=1e-5)
    unstable = rectified_target(torch.tensor([0.2]), torch.tensor([0.4]))  # w^o below τ: w^c
    assert torch.allclose(unstable, torch.tensor([0.2]))


def test_oscillation_split_uses_kl_of_consecutive_predictions(monkeypatch):
    division = _division()
    prev = torch.softmax(torch.randn(6, 5, dtype=torch.float64), 1).numpy()
    now = torch.softmax(torch.randn(6, 5, dtype=torch.float64), 1).numpy()
    kl = [sum(p * math.log(p / q) for p, q in zip(now[i], prev[i])) for i in range(6)]
    kl_reverse = [sum(q * math.log(q / p) for p, q in zip(now[i], prev[i])) for i in range(6)]
    scores = division.oscillation_scores(prev, now)
    assert np.allclose(scores, kl, rtol=1e-9) or np.allclose(scores, kl_reverse, rtol=1e-9)

    recipe = _recipe(warmup_epochs=1)
    seen = []
    original = division.oscillation_scores
    monkeypatch.setattr(division, "oscillation_scores", lambda a, b: seen.append((a, b)) or original(a, b))
    assert recipe.begin_epoch(0) == {} and recipe.previous_predictions is not None
    first = recipe.previous_predictions.copy()
    with torch.no_grad():
        for p in recipe.classifiers.parameters():
            p.add_(torch.randn_like(p))
    values = recipe.begin_epoch(1)
    assert len(seen) == 2 and np.array_equal(seen[0][0], first[0])
    assert np.allclose(seen[1][1], recipe.previous_predictions[1])
    assert recipe.oscillation_prob.shape == (2, len(recipe.context.train))
    assert "oscillation/0/clean_fraction" in values


def test_options_and_resume_state():
    with pytest.raises(ConfigError, match="caption_by"):
        build_options(PC2, {"caption_by": "text"})
    with pytest.raises(ConfigError, match=r"needs method\.pseudo_classification"):
        build_options(PC2, {"pseudo_classification": False})
    build_options(
        PC2, {"pseudo_classification": False, "rectification": False, "caption_by": "embedding"}
    )  # fmt: skip  (Table 3, row 5)
    recipe, other = _recipe(), _recipe()
    recipe.previous_predictions = np.random.default_rng(0).random((2, 24, 6)).astype(np.float32)
    with torch.no_grad():
        for p in recipe.classifiers.parameters():
            p.add_(1.0)
    other.load_state_dict(recipe.state_dict())
    for a, b in zip(recipe.classifiers.parameters(), other.classifiers.parameters()):
        assert torch.equal(a, b)
    assert np.array_equal(other.previous_predictions, recipe.previous_predictions)
    n_model = sum(p.numel() for m in recipe.models for p in m.parameters())
    n_group = sum(p.numel() for p in recipe.param_groups(1e-3)[0]["params"])
    assert n_group == n_model + sum(p.numel() for p in recipe.classifiers.parameters())


def _tiny(recipe, tmp_path, *extra):
    overrides = [
        f"recipe={recipe}",
        "data.source=synthetic",
        "data.synthetic_images=400",
        "data.noise.rate=0.5",
        "model.embed_dim=64",
        "model.word_dim=32",
        "train.epochs=6",
        "train.batch_size=64",
        "train.threads=1",
        f"output={tmp_path / recipe}",
        *extra,
    ]
    return train_run(load_config(None, overrides), progress=False, log=lambda m: None)


@pytest.mark.slow  # twins by default: test_single_process_unchanged.py[pc2] (every number), test_distributed
def test_tiny_noisy_run_beats_vse(tmp_path):
    _division()
    pc2 = _tiny("pc2", tmp_path, "method.warmup_epochs=2")
    vse = _tiny("vse", tmp_path)
    assert pc2["test"]["rsum"] > vse["test"]["rsum"] + 5


def test_warmup_without_classification_is_ncrs(make_recipe):
    reference = make_recipe("pc2")
    paper = make_recipe("pc2", warmup_classification=False)
    batch = next(iter(paper.context.train.batches(16, seed=0)))
    assert set(reference.warmup_terms(0, batch)) == {"warmup", "pseudo_cls", "balance"}
    terms = paper.warmup_terms(0, batch)
    assert set(terms) == {"warmup"}
    sims = paper.models[0](batch.images, batch.tokens, batch.lengths)
    assert torch.allclose(terms["warmup"], triplet_loss(sims, 0.2).sum() / len(batch))

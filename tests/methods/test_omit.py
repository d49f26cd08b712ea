"""The omit recipe: its batch augmentations do what they say, and a tiny run learns."""

from __future__ import annotations

import pytest
import torch

from mispair.config import load_config
from mispair.data.batching import TrainingPairs, encode_captions
from mispair.data.synthetic import make_synthetic
from mispair.data.vocab import Vocabulary
from mispair.engine.run import train_run
from mispair.methods.base import RecipeContext, build_options, get_recipe
from mispair.methods.omit import corrupt_captions, drop_fragments, word_ids
from mispair.nn.assembly import build_model

MASK, VOCAB = 3, torch.arange(10, 60)


def captions(n: int = 3000, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Captions ``[1, w_1 < w_2 < ... , 2]`` of 4–24 distinct words (ids ≥ 100), 0-padded."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(4, 25, (n,), generator=gen) + 2
    tokens = torch.zeros(n, int(lengths.max()), dtype=torch.long)
    for row, length in enumerate(lengths.tolist()):
        tokens[row, :length] = torch.tensor([1, *range(100, 100 + length - 2), 2])
    return tokens, lengths


def corrupt(tokens, lengths, rates, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return corrupt_captions(tokens, lengths, rates, mask_token=MASK, vocabulary=VOCAB, generator=gen)


def test_caption_rates_ends_and_order():
    """Paper rates: ~10 % masked, ~2 % replaced, ~8 % discarded; ends kept, order kept."""
    tokens, lengths = captions()
    out, new_lengths = corrupt(tokens, lengths, (0.1, 0.02, 0.08))
    inner = int((lengths - 2).sum())
    masked = replaced = 0
    for row in range(len(tokens)):
        seq = out[row, : int(new_lengths[row])].tolist()
        assert seq[0] == 1 and seq[-1] == 2 and len(seq) >= 2
        assert out[row, int(new_lengths[row]) :].eq(0).all()
        words = [w for w in seq[1:-1] if w >= 100]
        assert words == sorted(words) and set(words) <= set(range(100, 100 + int(lengths[row])))
        masked += seq.count(MASK)
        replaced += sum(10 <= w < 60 for w in seq)
    discarded = inner - int((new_lengths - 2).sum())
    for count, rate in ((masked, 0.1), (replaced, 0.02), (discarded, 0.08)):
        assert abs(count / inner - rate) < 4 * (rate / inner) ** 0.5  # 4 standard deviations


@pytest.mark.parametrize("rates", [(0.3, 0, 0), (0, 0.3, 0), (0, 0, 0.3)])
def test_each_caption_operation_alone(rates):
    tokens, lengths = captions(1000, seed=1)
    out, new_lengths = corrupt(tokens, lengths, rates)
    inner = int((lengths - 2).sum())
    if rates[2] == 0:
        assert torch.equal(new_lengths, lengths)
        changed = int((out != tokens).sum())
        hit = (out == MASK) if rates[0] else ((out >= 10) & (out < 60))
        assert changed == int(hit.sum()) and abs(changed / inner - 0.3) < 0.03
    else:
        assert (new_lengths >= 2).all() and abs(1 - (new_lengths - 2).sum() / inner - 0.3) < 0.03


def test_short_captions_and_determinism():
    tokens = torch.tensor([[1, 0, 0], [1, 2, 0], [1, 7, 2]])
    lengths = torch.tensor([1, 2, 3])
    out, new_lengths = corrupt(tokens, lengths, (0.0, 0.0, 0.99), seed=3)
    assert (new_lengths >= 1).all() and torch.equal(out[:2], tokens[:2])
    big, big_lengths = captions(200)
    first = corrupt(big, big_lengths, (0.1, 0.02, 0.08), seed=5)
    again = corrupt(big, big_lengths, (0.1, 0.02, 0.08), seed=5)
    other = corrupt(big, big_lengths, (0.1, 0.02, 0.08), seed=6)
    assert torch.equal(first[0], again[0]) and not torch.equal(first[0], other[0])
    same = corrupt(big, big_lengths, (0.0, 0.0, 0.0))
    assert torch.equal(same[0], big) and torch.equal(same[1], big_lengths)


def test_drop_fragments_keeps_a_random_ordered_subset():
    feats = torch.arange(4 * 36, dtype=torch.float32).view(4, 36, 1).expand(4, 36, 3)
    gen = torch.Generator().manual_seed(0)
    out = drop_fragments(feats, 0.4, gen)
    assert out.shape == (4, 21, 3)  # ⌊36 × 0.6⌋, as the reference
    for row in range(4):
        kept = out[row, :, 0]
        assert (kept.diff() > 0).all() and set(kept.tolist()) <= set(feats[row, :, 0].tolist())
    assert not torch.equal(out[0, :, 0] - out[0, 0, 0], out[1, :, 0] - out[1, 0, 0])
    again = drop_fragments(feats, 0.4, torch.Generator().manual_seed(0))
    assert torch.equal(out, again)
    assert drop_fragments(feats, 0.0, gen) is feats
    assert drop_fragments(feats[:, :1], 0.9, gen).shape == (4, 1, 3)


def test_recipe_works_with_any_head():
    """One step with the cosine head and with CAM: finite triplet loss, reproducible batches."""
    pairs = make_synthetic(40, seed=0)
    vocab = Vocabulary.build(pairs.captions, 1)
    train = TrainingPairs(pairs, encode_captions(pairs, vocab))
    assert set(word_ids(train.tokens).tolist()) <= set(range(4, len(vocab)))
    context = RecipeContext(train, batch_size=16, epochs=2, device=torch.device("cpu"), seed=0)
    cls = get_recipe("omit")
    for head in ("cosine", "cam"):
        cfg = load_config(
            None, ["recipe=omit", f"model.head={head}", "model.embed_dim=32", "model.word_dim=16"]
        ).model
        model = build_model(cfg, pairs.feature_dim, len(vocab))
        recipe = cls([model], build_options(cls, {}), context)
        batch = next(train.batches(16, seed=0))
        loss = recipe.train_step(batch, epoch=1).terms["triplet"]
        assert torch.isfinite(loss) and loss.requires_grad
        recipe.begin_epoch(1)
        first = recipe.augment(batch, 1)
        recipe.begin_epoch(1)
        assert all(torch.equal(x, y) for x, y in zip(first, recipe.augment(batch, 1)))


def test_tiny_omit_run_beats_chance(tmp_path):
    overrides = [
        "recipe=omit",
        "data.source=synthetic",
        "data.synthetic_images=300",
        "model.head=omit",
        "model.embed_dim=64",
        "model.word_dim=32",
        "train.epochs=3",
        "train.batch_size=32",
        "train.threads=1",
        f"output={tmp_path}",
    ]
    result = train_run(load_config(None, overrides), progress=False, log=lambda m: None)
    # chance on the 200-image test split: R@1/5/10 ≈ 0.5/2.5/5 % per direction, rSum ≈ 16
    assert result["test"]["rsum"] > 250
    log = (tmp_path / "log.jsonl").read_text().splitlines()
    assert len(log) == 3 and '"loss/triplet"' in log[0]


def test_reduction_option_sums_eq_6(make_recipe):
    no_augmentation = {
        "visual_mask": 0.0,
        "caption_mask": 0.0,
        "caption_replace": 0.0,
        "caption_discard": 0.0,
    }
    mean = make_recipe("omit", **no_augmentation)
    summed = make_recipe("omit", **no_augmentation, reduction="sum")
    batch = next(iter(mean.context.train.batches(16, seed=0)))
    total = summed.train_step(batch, epoch=2).terms["triplet"]
    assert torch.allclose(total, mean.train_step(batch, epoch=2).terms["triplet"] * len(batch))

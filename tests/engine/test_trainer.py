"""The trainer's step contract: it moves each item, applies every Update in order, steps the
optimizer each one names and clips the model's gradients only."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import torch
from torch import nn

from mispair.config import ModelConfig, load_config
from mispair.data.batching import TrainingPairs, encode_captions
from mispair.data.noise import inject_noise
from mispair.data.synthetic import make_synthetic
from mispair.data.vocab import Vocabulary
from mispair.engine.trainer import Trainer
from mispair.methods.base import Recipe, RecipeContext, Update, build_options, get_recipe
from mispair.methods.l2rm import RematchItem
from mispair.nn.assembly import build_model


@dataclass
class Item:
    """A fake step item recording the devices it was moved to."""

    x: torch.Tensor
    moved_to: list = field(default_factory=list)

    def to(self, device):
        self.moved_to.append(torch.device(device))
        return self


class TwoOptimizers(Recipe):
    """A model parameter (the trainer's optimizer) and an auxiliary one (SGD of its own, lr 1);
    each step updates ``aux`` first, then the model, and records what the model update saw."""

    name = "two_optimizers"

    def __init__(self, context: RecipeContext) -> None:
        self.model = nn.Linear(3, 1, bias=False)
        nn.init.ones_(self.model.weight)  # gradient 1200 x, far above any clip
        super().__init__([self.model], None, context)
        self.aux = nn.Parameter(torch.zeros(3))
        self.aux_optimizer = torch.optim.SGD([self.aux], lr=1.0)
        self.seen_aux: list[torch.Tensor] = []

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"aux": self.aux_optimizer}

    def train_step(self, item: Item, epoch: int) -> Iterator[Update]:
        yield Update({"aux_loss": -(self.aux * item.x).sum() * 100}, "aux")
        self.seen_aux.append(self.aux.detach().clone())
        main = (self.model(item.x[None]) ** 2).sum() * 100
        yield Update({"main": main, "logged_only": main.detach() * 0 + 7}, "model")


def _trainer(tmp_path, recipe: Recipe, *overrides: str) -> Trainer:
    config = load_config(None, ["train.lr=0.1", *overrides])
    return Trainer(config, recipe, dev=None, dev_tokens=[], out_dir=tmp_path, progress=False)


def _context(train=None, batch_size=32, noise=None) -> RecipeContext:
    train = TrainingPairs(make_synthetic(2, 1), [[1], [2]]) if train is None else train  # unused
    return RecipeContext(train, batch_size, 3, torch.device("cpu"), 0, noise=noise)


def test_each_update_steps_the_optimizer_it_names_in_order(tmp_path):
    recipe = TwoOptimizers(_context())
    trainer = _trainer(tmp_path, recipe, "train.grad_clip=0.5")
    weight = recipe.model.weight.detach().clone()
    item = Item(torch.tensor([1.0, 2.0, 3.0]))
    logged = trainer._step(item, epoch=0)
    assert item.moved_to == [torch.device("cpu")]
    assert list(logged) == ["aux_loss", "main", "logged_only"] and logged["logged_only"] == 7.0
    # aux: one plain SGD step on its unclipped gradient (-100 x, norm ≈ 374 > grad_clip)
    assert torch.equal(recipe.seen_aux[0], torch.tensor([100.0, 200.0, 300.0]))
    assert torch.equal(recipe.aux.grad, torch.tensor([-100.0, -200.0, -300.0]))
    # the model: its own (Adam) step, on gradients clipped to train.grad_clip
    assert not torch.equal(recipe.model.weight, weight)
    assert recipe.model.weight.grad.norm() == pytest.approx(0.5, rel=1e-5)
    assert trainer.optimizer.state_dict()["state"][0]["step"] == 1


def test_the_model_name_is_reserved(tmp_path):
    recipe = TwoOptimizers(_context())
    recipe.optimizers = lambda: {"model": recipe.aux_optimizer}
    with pytest.raises(ValueError, match="'model' is the trainer's optimizer"):
        _trainer(tmp_path, recipe)


def _l2rm(batch_size=32):
    pairs = make_synthetic(30, 5, seed=0)
    vocab = Vocabulary.build(pairs.captions, 1)
    noise = inject_noise(30, 5, 0.4, "pmp", seed=0)
    train = TrainingPairs(pairs, encode_captions(pairs, vocab), noise.image_of_caption)
    torch.manual_seed(0)
    models = [build_model(ModelConfig(embed_dim=32, word_dim=16), pairs.feature_dim, len(vocab))]
    cls = get_recipe("l2rm")
    options = build_options(cls, {"warmup_epochs": 1, "reconstruct_fraction": 0.5})
    return cls(models, options, _context(train, batch_size, noise))


def test_l2rm_cost_is_stepped_by_the_trainer_before_the_refined_alignment(tmp_path, monkeypatch):
    recipe = _l2rm()
    trainer = _trainer(tmp_path, recipe, "recipe=l2rm")
    recipe.begin_epoch(1)
    item = next(i for i in recipe.epoch_batches(1, seed=1) if isinstance(i, RematchItem))
    assert item.recon is not None and len(item.mismatched) > 1
    cost_params = lambda: [p.detach().clone() for p in recipe.cost_fn.parameters()]  # noqa: E731
    before, seen = cost_params(), []
    original = recipe.refined_alignment

    def spy(sims):
        seen.append(cost_params())
        return original(sims)

    monkeypatch.setattr(recipe, "refined_alignment", spy)
    logged = trainer._step(item, epoch=1)
    assert list(logged) == ["cost_ot", "triplet", "rematch"] and len(seen) == 1
    after = cost_params()
    # π̃ saw the cost after the trainer's (one) step, and nothing moved it afterwards
    assert all(not torch.equal(b, s) for b, s in zip(before, seen[0]))
    assert all(torch.equal(s, a) for s, a in zip(seen[0], after))
    assert recipe.cost_optimizer.state_dict()["state"][0]["step"] == 1
    assert trainer.optimizer.state_dict()["state"][0]["step"] == 1

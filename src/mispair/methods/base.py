"""The recipe interface the trainer drives, and the registry of recipes."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from mispair.data.batching import Batch, TrainingPairs
from mispair.data.noise import NoiseRecord
from mispair.errors import ConfigError
from mispair.nn.model import RetrievalModel
from mispair.options import build_dataclass


@dataclass
class RecipeContext:
    """What a recipe may read about the run: the training pairs, sizes, device and seed."""

    train: TrainingPairs
    batch_size: int
    epochs: int
    device: torch.device
    seed: int
    eval_batch_size: int = 256
    noise: NoiseRecord | None = None  # the true noise, for scoring detection only; never trained on


class Recipe:
    """A training method: how many models, what each epoch and each step does.

    Subclasses set ``name``, ``Options`` (a dataclass of the method's hyperparameters, filled from
    the config's ``method`` section) and ``n_models``, and implement :meth:`train_step`. The
    trainer calls, per epoch: :meth:`begin_epoch` (e.g. the sample division), then
    :meth:`train_step` on every item of :meth:`epoch_batches`, summing the returned named loss
    terms into one backward pass, then :meth:`end_epoch`; evaluation uses :attr:`models`
    (similarities averaged).
    """

    name: ClassVar[str] = ""
    n_models: ClassVar[int] = 1

    @dataclass
    class Options:
        pass

    def __init__(self, models: list[RetrievalModel], options: Any, context: RecipeContext) -> None:
        self.models = models
        self.options = options
        self.context = context

    def param_groups(self, lr: float) -> list[dict[str, Any]]:
        """Optimizer parameter groups (one for all models' parameters by default)."""
        return [{"params": [p for m in self.models for p in m.parameters()], "lr": lr}]

    def begin_epoch(self, epoch: int) -> dict[str, float]:
        """Per-epoch work before training (division); returns values to log."""
        return {}

    def epoch_batches(self, epoch: int, seed: int) -> Iterator[Any]:
        """What :meth:`train_step` receives this epoch (default: every pair once, shuffled)."""
        return self.context.train.batches(self.context.batch_size, seed=seed)

    def n_steps(self, epoch: int) -> int | None:
        """The number of items :meth:`epoch_batches` yields, for the progress bar (None: unknown)."""
        return self.context.train.n_batches(self.context.batch_size)

    def train_step(self, batch: Batch, epoch: int) -> dict[str, Tensor]:
        """Named scalar loss terms of one step (the trainer sums them and steps the optimizer)."""
        raise NotImplementedError

    def end_epoch(self, epoch: int) -> dict[str, float]:
        """Per-epoch values to log after the epoch's training (e.g. a learned part's drift)."""
        return {}

    def after_step(self) -> None:
        """Called after each optimizer step (e.g. a second optimizer of the recipe's own)."""

    def state_dict(self) -> dict[str, Any]:
        """Recipe state to checkpoint (tensors and plain data only)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""

    def export_scores(self) -> dict[str, np.ndarray]:
        """Per-pair scores for ``--export-pairs`` (e.g. ``clean_prob``); none by default."""
        return {}


_RECIPES: dict[str, type[Recipe]] = {}


def register_recipe(cls: type[Recipe]) -> type[Recipe]:
    """Class decorator adding a recipe to the registry under ``cls.name``."""
    _RECIPES[cls.name] = cls
    return cls


def _load_all() -> None:
    package = importlib.import_module("mispair.methods")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"mispair.methods.{module.name}")


def list_recipes() -> list[str]:
    """Names of the registered recipes."""
    _load_all()
    return sorted(_RECIPES)


def get_recipe(name: str) -> type[Recipe]:
    _load_all()
    if name not in _RECIPES:
        raise ConfigError(f"unknown recipe {name!r} (known: {', '.join(sorted(_RECIPES))})")
    return _RECIPES[name]


def build_options(cls: type[Recipe], values: dict[str, Any]) -> Any:
    """The recipe's ``Options`` from the config's ``method`` section, typed by its annotations
    (:func:`mispair.options.build_dataclass`): an unknown key or a bad value is a one-line
    error naming ``method.<key>``."""
    return build_dataclass(cls.Options, values, "method")


LossFn = Callable[[Tensor], Tensor]

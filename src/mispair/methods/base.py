"""The recipe interface the trainer drives, and the registry of recipes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

import numpy as np
import torch
from torch import Tensor

from mispair.data.batching import Batch, TrainingPairs
from mispair.data.noise import NoiseRecord
from mispair.distributed import Shard
from mispair.nn.model import RetrievalModel
from mispair.options import build_dataclass
from mispair.registry import Registry

MODEL_OPTIMIZER = "model"
"""The name of the trainer's optimizer over :meth:`Recipe.param_groups` (the models')."""


class StepItem(Protocol):
    """What :meth:`Recipe.epoch_batches` yields: any item that moves itself to a device (a
    :class:`~mispair.data.batching.Batch`, :class:`Warmup`, a recipe's own item type)."""

    def to(self, device: torch.device | str) -> StepItem: ...


@dataclass(frozen=True)
class Warmup:
    """A warm-up step of model ``model`` on a batch of all pairs (division not used yet)."""

    batch: Batch
    model: int = 0

    def to(self, device: torch.device | str) -> Warmup:
        return replace(self, batch=self.batch.to(device))


@dataclass
class Update:
    """One optimizer step a recipe asks the trainer for.

    The trainer zeroes the gradients of ``optimizer`` (a name: :data:`MODEL_OPTIMIZER`, or one of
    :meth:`Recipe.optimizers`), back-propagates the sum of ``terms`` (named scalar tensors; a
    term without gradient, e.g. a detached diagnostic, is only logged), clips the gradients when
    it is the model optimizer (``train.grad_clip``) and steps it; every term is logged.
    """

    terms: dict[str, Tensor]
    optimizer: str = MODEL_OPTIMIZER


StepResult = Update | Iterator[Update]
"""What :meth:`Recipe.train_step` returns: one update, or a generator of sequential updates,
each applied by the trainer before the generator computes the next."""


def as_updates(result: StepResult) -> Iterator[Update]:
    """The updates of one :meth:`Recipe.train_step` result, in order."""
    return iter((result,)) if isinstance(result, Update) else result


@dataclass
class RecipeContext:
    """What a recipe may read about the run: the training pairs, sizes, device and seed, and the
    pair scores of :mod:`mispair.engine.pair_scores` when the run's ``division`` asks for them."""

    train: TrainingPairs
    batch_size: int
    epochs: int
    device: torch.device
    seed: int
    eval_batch_size: int = 256
    noise: NoiseRecord | None = None  # the true noise, for scoring detection only; never trained on
    pair_scores: np.ndarray | None = None  # [n_pairs] memorisation-free scores for the division, if any
    p_threshold: float = 0.5  # clean above it, on the pair scores' division (division.p_threshold)
    answers: np.ndarray | None = None  # [n_pairs] a person's answers (1 mismatched, 0 correct, NaN none)

    @property
    def is_noisy(self) -> np.ndarray | None:
        """``[n_pairs]`` the true noise flags, for scoring a division only (None when unknown)."""
        return None if self.noise is None else self.noise.is_noisy

    @property
    def shard(self) -> Shard:
        """This process's share of the run (:attr:`TrainingPairs.shard`: all of it in a single
        process); its :meth:`~mispair.data.batching.TrainingPairs.batches` are already sharded."""
        return self.train.shard


class Recipe:
    """A training method: how many models, what each epoch and each step does.

    Subclasses set ``name``, ``Options`` (a dataclass of the method's hyperparameters, filled from
    the config's ``method`` section) and ``n_models``, and implement :meth:`train_step`. The
    trainer calls, per epoch: :meth:`begin_epoch` (e.g. the sample division), then
    :meth:`train_step` on every item of :meth:`epoch_batches` (moved to the device by its
    ``to``), applying each :class:`Update` it returns (zero grad, backward of the summed terms,
    clip, optimizer step), then :meth:`end_epoch`; evaluation uses :attr:`models`
    (similarities averaged). Recipes never call ``backward`` or ``step`` themselves.
    """

    name: ClassVar[str] = ""
    n_models: ClassVar[int] = 1
    needs_pair_scores: ClassVar[bool] = False  # the run's division must give held-out scores
    side_by_side: ClassVar[bool] = False  # its single model may be trained with others in one batched step

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

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """The recipe's own optimizers by name (e.g. a learned cost's), which an :class:`Update`
        may name; the recipe sets their learning rates and checkpoints them in
        :meth:`state_dict`, the trainer steps them. None by default."""
        return {}

    def epoch_batches(self, epoch: int, seed: int) -> Iterator[StepItem]:
        """What :meth:`train_step` receives this epoch (default: every pair once, shuffled)."""
        return self.context.train.batches(self.context.batch_size, seed=seed)

    def n_steps(self, epoch: int) -> int | None:
        """The number of items :meth:`epoch_batches` yields, for the progress bar (None: unknown)."""
        return self.context.train.n_batches(self.context.batch_size)

    def train_step(self, item: Any, epoch: int) -> StepResult:
        """The update(s) of one item of :meth:`epoch_batches` (already on the device): one
        :class:`Update` of the model optimizer, or a generator of updates the trainer applies
        one by one (the generator resumes only after the previous step)."""
        raise NotImplementedError

    def end_epoch(self, epoch: int) -> dict[str, float]:
        """Per-epoch values to log after the epoch's training (e.g. a learned part's drift)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """Recipe state to checkpoint (tensors and plain data only)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""

    def export_scores(self) -> dict[str, np.ndarray]:
        """Per-pair scores for ``--export-pairs`` (e.g. ``clean_prob``); none by default."""
        return {}


RECIPES: Registry[type[Recipe]] = Registry("recipe", "recipe", "mispair.methods")
list_recipes = RECIPES.names
get_recipe = RECIPES.get


def register_recipe(cls: type[Recipe]) -> type[Recipe]:
    """Class decorator adding a recipe to the registry under ``cls.name``."""
    return RECIPES.register(cls.name)(cls)


def build_options(cls: type[Recipe], values: dict[str, Any]) -> Any:
    """The recipe's ``Options`` from the config's ``method`` section, typed by its annotations
    (:func:`mispair.options.build_dataclass`): an unknown key or a bad value is a one-line
    error naming ``method.<key>``."""
    return build_dataclass(cls.Options, values, "method")


LossFn = Callable[[Tensor], Tensor]

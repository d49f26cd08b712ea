"""The training loop: epochs, optimizer and step decay, validation, checkpoints, resume, logs; on
several processes, DDP around each step (:mod:`mispair.distributed`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mispair.atomic import atomic_text
from mispair.config import RunConfig, TrainConfig
from mispair.data.pairset import PairSet
from mispair.distributed import Shard, barrier, main_only, mean_over, replicated_step, sync_buffers
from mispair.engine.evaluation import evaluate_split
from mispair.engine.trained import Checkpoint, save_checkpoint
from mispair.errors import ConfigError, DataError, DivergedError
from mispair.methods.base import MODEL_OPTIMIZER, Recipe, StepItem, Update
from mispair.progress import ProgressLine, progress_bar
from mispair.safe_io import append_text
from mispair.safe_parse import load_json
from mispair.seeds import child_seed


@dataclass
class TrainResult:
    best_epoch: int
    best_dev: dict[str, float]
    last_dev: dict[str, float]


class Trainer:
    """Runs a recipe for ``config.train.epochs`` epochs in ``out_dir``.

    Files written there: ``last.pt`` (after every epoch, for resume), ``best.pt`` (best dev rSum),
    ``log.jsonl`` (one line per epoch: every named loss term, the recipe's epoch values, dev
    metrics, learning rate, time). All checkpoints are written atomically. Without ``dev`` and
    ``out_dir`` only :meth:`train_epoch` serves (models trained in memory, e.g. out-of-fold
    scorers).

    The trainer is the only place that back-propagates and steps optimizers: the model optimizer
    (:data:`~mispair.methods.base.MODEL_OPTIMIZER`, over the recipe's ``param_groups``, with
    ``train.lr`` and its step decay) and the recipe's own (:meth:`Recipe.optimizers`), each
    when an :class:`~mispair.methods.base.Update` names it.

    When the recipe's training pairs are sharded (a multi-process run: ``recipe.context.shard``),
    every update is computed inside the forward of one DDP over all the optimizers' parameters,
    so its backward averages the gradients over the ranks; after each epoch rank 0's buffers are
    copied to the others; evaluation is sharded; only rank 0 logs and writes files.
    """

    def __init__(
        self,
        config: RunConfig,
        recipe: Recipe,
        dev: PairSet | None = None,
        dev_tokens: list[list[int]] | None = None,
        out_dir: Path | None = None,
        *,
        extra_state: dict[str, Any] | None = None,
        progress: bool = True,
        log: Callable[[str], None] = print,
    ) -> None:
        self.config = config
        self.recipe = recipe
        self.dev, self.dev_tokens = dev, dev_tokens
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.extra_state = extra_state or {}
        self.progress = progress
        self.shard: Shard = recipe.context.shard
        self.log = main_only(self.shard, log)
        self.device = recipe.context.device
        self.optimizer = build_optimizer(recipe.param_groups(config.train.lr), config.train)
        self.base_lrs = [g["lr"] for g in self.optimizer.param_groups]
        own = recipe.optimizers()
        if MODEL_OPTIMIZER in own:
            raise ValueError(f"recipe {recipe.name!r}: {MODEL_OPTIMIZER!r} is the trainer's optimizer")
        self.optimizers = {MODEL_OPTIMIZER: self.optimizer, **own}
        trained = (p for o in self.optimizers.values() for g in o.param_groups for p in g["params"])
        self.run_step = replicated_step(self.shard, trained)

    # ----------------------------------------------------------------- checkpoints
    def _payload(self, epoch: int, best_epoch: int, best_dev: dict[str, float]) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "epoch": epoch,
            "best_epoch": best_epoch,
            "best_dev": best_dev,
            "models": [m.state_dict() for m in self.recipe.models],
            "optimizer": self.optimizer.state_dict(),
            "recipe": self.recipe.state_dict(),
            **self.extra_state,
        }

    def _resume(self) -> tuple[int, int, dict[str, float]]:
        path = self.out_dir / "last.pt"
        if not path.is_file():
            return 0, -1, {}
        saved = Checkpoint.read(path)
        self._load(path, saved)
        self._truncate_log(saved.epoch)
        self.log(ProgressLine(f"resuming {path} after epoch {saved.epoch}"))
        return saved.epoch, saved.best_epoch, saved.best_dev

    def _load(self, path: Path, saved: Checkpoint) -> None:
        """The models, optimizer and recipe state of ``saved``; a checkpoint of another run (a
        model of other sizes, another number of models: a ``last.pt`` copied or left there) is a
        one-line :class:`~mispair.errors.ConfigError` saying what differs, not a traceback."""
        try:
            if len(saved.weights) != len(self.recipe.models):
                raise ValueError(
                    f"{len(saved.weights)} model(s) saved, this recipe trains {len(self.recipe.models)}"
                )
            for model, weights in zip(self.recipe.models, saved.weights):
                model.load_state_dict(weights)
            self.optimizer.load_state_dict(saved.optimizer)
            self.recipe.load_state_dict(saved.recipe_state)
        except (RuntimeError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"{path}: a checkpoint of another run, not this config's ({_differs(exc)}); use "
                "another output folder (--out), or --no-resume to train from the start"
            ) from None

    def _truncate_log(self, epochs_done: int) -> None:
        path = self.out_dir / "log.jsonl"
        if self.shard.is_main and path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines()
            kept = [ln for ln in lines if ln.strip() and _epoch(ln, path) < epochs_done]
            atomic_text(path, "".join(ln + "\n" for ln in kept))

    # ----------------------------------------------------------------- training
    def _set_lr(self, epoch: int) -> float:
        cfg = self.config.train
        factor = cfg.lr_decay ** sum(epoch >= e for e in cfg.lr_decay_epochs)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * factor
        return self.base_lrs[0] * factor

    def _step(self, item: StepItem, epoch: int) -> dict[str, float]:
        """Every update of one item, in order; the logged value of each named term."""
        logged: dict[str, float] = {}
        for update in self._updates(item.to(self.device), epoch):
            self._apply(update)
            logged.update({k: float(v.detach()) for k, v in update.terms.items()})
        return logged

    def _updates(self, item: StepItem, epoch: int) -> Iterator[Update]:
        """The updates of :meth:`Recipe.train_step`, each computed through :attr:`run_step` (in
        DDP's forward on several processes) only once the previous one has been applied."""
        result = self.run_step(self.recipe.train_step, item, epoch)
        if isinstance(result, Update):
            yield result
            return
        while (update := self.run_step(next, result, None)) is not None:
            yield update

    def _apply(self, update: Update) -> None:
        """Zero grad, backward of the summed terms, clip (model parameters only), step."""
        optimizer = self.optimizers[update.optimizer]
        loss = sum(update.terms.values())
        optimizer.zero_grad(set_to_none=True)
        if not (isinstance(loss, torch.Tensor) and loss.requires_grad):
            return
        if not torch.isfinite(loss):  # stop before a step that would spread NaN into the weights
            raise DivergedError(
                f"the training loss became {loss.item()} ({', '.join(update.terms)}); "
                "lower train.lr (last.pt keeps the last finished epoch)"
            )
        loss.backward()
        if update.optimizer == MODEL_OPTIMIZER and self.config.train.grad_clip > 0:
            params = [p for g in optimizer.param_groups for p in g["params"]]
            torch.nn.utils.clip_grad_norm_(params, self.config.train.grad_clip)
        optimizer.step()

    def _train_epoch(self, epoch: int) -> dict[str, float]:
        seed = child_seed(self.config.train.seed, "epoch", epoch)
        torch.manual_seed(_rank_seed(self.shard, seed))  # dropout differs between ranks
        totals: dict[str, float] = {}
        steps = 0
        bar = progress_bar(
            self.recipe.epoch_batches(epoch, seed),
            total=self.recipe.n_steps(epoch),
            desc=f"epoch {epoch + 1}/{self.config.train.epochs}",
            disable=not self.progress,
            leave=False,
        )
        for m in self.recipe.models:
            m.train()
        for item in bar:
            for key, value in self._step(item, epoch).items():
                totals[key] = totals.get(key, 0.0) + value
            steps += 1
            bar.set_postfix(loss=f"{sum(totals.values()) / steps:.4f}", refresh=False)
        sync_buffers(self.shard, self.recipe.models)
        means = mean_over(self.shard, {k: v / max(steps, 1) for k, v in totals.items()})
        return {f"loss/{k}": v for k, v in means.items()}

    def evaluate_dev(self) -> dict[str, float]:
        return evaluate_split(
            self.recipe.models,
            self.dev,
            self.dev_tokens,
            batch_size=self.config.train.eval_batch_size,
            device=self.device,
            shard=self.shard,
        )

    def train_epoch(self, epoch: int) -> dict[str, Any]:
        """One epoch without evaluation: the lr schedule, the recipe's ``begin_epoch`` (division),
        the training pass and ``end_epoch``. Returns the epoch's log values: ``lr``, ``loss/*``,
        the recipe's values, ``seconds/division`` and ``seconds/train``."""
        began = time.perf_counter()
        lr = self._set_lr(epoch)
        torch.manual_seed(child_seed(self.config.train.seed, "epoch", epoch))
        epoch_values = self.recipe.begin_epoch(epoch)
        divided = time.perf_counter()
        losses = self._train_epoch(epoch)
        epoch_values.update(self.recipe.end_epoch(epoch))
        return {
            "lr": lr,
            **losses,
            **epoch_values,
            "seconds/division": round(divided - began, 3),
            "seconds/train": round(time.perf_counter() - divided, 3),
        }

    def _save(self, name: str, epoch: int, best_epoch: int, best_dev: dict[str, float]) -> None:
        if self.shard.is_main:
            save_checkpoint(self.out_dir / name, self._payload(epoch, best_epoch, best_dev))

    def fit(self, resume: bool = True) -> TrainResult:
        """Train (continuing from ``last.pt`` when ``resume``); return the best dev metrics. On
        several processes every rank calls it, and returns once rank 0 has written its files."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        start, best_epoch, best_dev = self._resume() if resume else (0, -1, {})
        last_dev = best_dev
        for epoch in range(start, self.config.train.epochs):
            began = time.perf_counter()
            values = self.train_epoch(epoch)
            trained = time.perf_counter()
            last_dev = self.evaluate_dev()
            if not best_dev or last_dev["rsum"] > best_dev["rsum"]:
                best_epoch, best_dev = epoch, last_dev
                self._save("best.pt", epoch + 1, best_epoch, best_dev)
            record = {
                "epoch": epoch,
                **values,
                **{f"dev/{k}": v for k, v in last_dev.items()},
                "seconds/eval": round(time.perf_counter() - trained, 3),
                "seconds": round(time.perf_counter() - began, 3),
            }
            losses = {k: v for k, v in values.items() if k.startswith("loss/")}
            if self.shard.is_main:
                append_text(self.out_dir / "log.jsonl", json.dumps(record) + "\n")  # never through a link
            self._save("last.pt", epoch + 1, best_epoch, best_dev)
            line = _summary(epoch, self.config.train.epochs, losses, last_dev, record["seconds"])
            self.log(ProgressLine(line))
        barrier(self.shard)  # the checkpoints exist before any rank reads them
        return TrainResult(best_epoch, best_dev, last_dev)


def build_optimizer(param_groups: list[dict[str, Any]], train: TrainConfig) -> torch.optim.Optimizer:
    """Adam (the NCR family) or AdamW (OMIT) over the recipe's parameter groups, with
    ``train.weight_decay`` (L2 for Adam, decoupled for AdamW).

    PyTorch's fused kernel where it has one for the parameters' device (CUDA; the CPU from
    torch 2.4): the same update as the default loop over the tensors, to float rounding, in one
    pass over them; older releases refuse ``fused`` on the CPU and get the loop."""
    cls = torch.optim.AdamW if train.optimizer == "adamw" else torch.optim.Adam
    try:
        return cls(param_groups, weight_decay=train.weight_decay, fused=True)
    except RuntimeError:  # no fused kernel for these parameters' device in this release
        return cls(param_groups, weight_decay=train.weight_decay)


def _rank_seed(shard: Shard, seed: int) -> int:
    """``seed`` on rank 0 (as a single process), a seed of their own on the other ranks."""
    return seed if shard.is_main else int(np.random.SeedSequence(shard.salt(seed)).generate_state(1)[0])


def _summary(epoch: int, epochs: int, losses: dict, dev: dict, seconds: float) -> str:
    loss_text = " ".join(f"{k.removeprefix('loss/')}={v:.4f}" for k, v in losses.items())
    return (
        f"epoch {epoch + 1}/{epochs}  {loss_text}  dev rsum={dev['rsum']:.1f} "
        f"(i2t R@1={dev['i2t_r1']:.1f}, t2i R@1={dev['t2i_r1']:.1f})  {seconds:.1f}s"
    )


def _epoch(line: str, path: Path) -> int:
    """The epoch of one ``log.jsonl`` line; a damaged line is a one-line error naming the file."""
    record = load_json(line, path)
    if not isinstance(record, dict) or not isinstance(record.get("epoch"), int):
        raise DataError(f"{path}: a damaged line (no epoch); delete the file, or rerun with --no-resume")
    return record["epoch"]


def _differs(exc: BaseException) -> str:
    """What a failed ``load_state_dict`` says differs, in one short line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    useful = [line for line in lines if line.startswith(("size mismatch", "Missing key", "Unexpected key"))]
    text = (useful or lines or [type(exc).__name__])[0]
    return text if len(text) <= 200 else text[:197] + "..."

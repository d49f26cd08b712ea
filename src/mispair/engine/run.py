"""Train a run from its config, in one process or in each process of a torchrun launch: only the
order of things (the parts come from :mod:`mispair.engine.assembly`, the held-out scores from
:mod:`mispair.engine.pair_scores`, the test metrics from :mod:`mispair.engine.evaluation`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import torch

from mispair.atomic import ensure_directory
from mispair.config import RunConfig
from mispair.data.batching import TrainingPairs
from mispair.data.loading import concrete_source
from mispair.data.pairset import PairSet
from mispair.distributed import (
    DEFAULT_TIMEOUT,
    Shard,
    from_main,
    main_first,
    main_only,
    process_group,
)
from mispair.division.scores import DivisionScores
from mispair.engine.assembly import (
    RunData,
    build_models,
    concrete_precision,
    load_run_data,
    other_splits,
    pick_device,
    planted_noise_note,
    prepare_text_encoder,
    test_pairs,
    training_pairs,
)
from mispair.engine.checks import check_data_fits, check_run_config
from mispair.engine.context import recipe_context
from mispair.engine.evaluation import evaluate_checkpoint, evaluate_runs
from mispair.engine.inputs import run_inputs
from mispair.engine.run_folder import RUN_OUTPUTS, check_resume, write_json
from mispair.engine.trained import TrainedRun
from mispair.engine.trainer import Trainer, TrainResult
from mispair.methods.base import Recipe, get_recipe
from mispair.output_folder import check_folder, claim_folder, holding
from mispair.progress import ProgressLine
from mispair.timings import Timings

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["RunOutcome", "TrainSummary", "evaluate_checkpoint", "train_outcome", "train_run"]


@dataclass(frozen=True)
class RunOutcome:
    """A finished run as its caller takes it over: the ``summary``, the held-out ``scores`` of its
    division (None in sample), the ``data`` it read, the other splits it scored (``others``: the
    dev and test pairs, or None) and its best checkpoint opened once (``best``, its data the
    run's). The files (``pair_scores.npz``, ``best.pt``, ``metrics.json``) are still written, for
    resuming and for tools that open a run folder later."""

    summary: TrainSummary
    scores: DivisionScores | None
    data: RunData
    others: TrainingPairs | None
    best: TrainedRun


@dataclass(frozen=True)
class PlantedNoise:
    """The noise a run planted: its ``rate``, ``protocol`` and ``seed``."""

    rate: float
    protocol: str
    seed: int


@dataclass(frozen=True)
class TrainSummary:
    """What a finished run gives back (and writes to ``metrics.json``): its ``best_epoch`` (from
    0), the dev metrics of that epoch, the test metrics of its best checkpoint, and the noise it
    planted (None without)."""

    best_epoch: int
    dev: dict[str, float]
    test: dict[str, float]
    planted_noise: PlantedNoise | None = None

    def to_dict(self) -> dict[str, object]:
        """``metrics.json``'s content."""
        out: dict[str, object] = {"best_epoch": self.best_epoch, "dev": self.dev, "test": self.test}
        if self.planted_noise is not None:
            out["planted_noise"] = asdict(self.planted_noise)
        return out

    def __getitem__(self, key: str) -> object:
        """``metrics.json``'s field ``key`` (read-only; the typed attributes are the API)."""
        return self.to_dict()[key]


def train_outcome(
    config: RunConfig,
    *,
    resume: bool = True,
    progress: bool = True,
    log: Callable[[str], None] = print,
    timeout: float = DEFAULT_TIMEOUT,
    overwrite: bool = False,
    timings: Timings | None = None,
) -> RunOutcome:
    """Train ``config`` in its output directory, then evaluate the best checkpoint on test.

    The output directory must be new, empty or a run's; ``overwrite`` writes into another folder
    (touching only a run's files; see :func:`~mispair.output_folder.claim_folder`). Its lock is
    taken before anything is read: a folder another run holds is refused at once, in one line.

    Returns its :class:`RunOutcome`: the summary (also written to ``metrics.json``), the held-out
    scores, the data read and the best checkpoint opened (once: nothing is read twice). In a process
    started by torchrun, every process of the launch calls it and trains its share of each batch
    (:func:`~mispair.distributed.process_group`; collectives fail after ``timeout`` seconds);
    only rank 0 logs and writes files, and every process returns the same summary. With
    ``timings``, its parts are lapped as ``reading`` (the data and the text encoder's features),
    ``division`` (the held-out scorers) and ``training`` (the run and its test evaluation).
    """
    device = pick_device(config.train.device)
    with process_group(device, timeout) as (shard, device):
        return _train_run(
            config,
            device,
            shard,
            resume=resume,
            progress=progress,
            log=main_only(shard, log),
            overwrite=overwrite,
            timings=Timings() if timings is None else timings,
        )


def train_run(config: RunConfig, **options: Unpack[RunOptions]) -> TrainSummary:
    """:func:`train_outcome`'s summary: the run trained (or resumed) and its best checkpoint
    evaluated on test (``metrics.json``); ``options`` are :func:`train_outcome`'s."""
    return train_outcome(config, **options).summary


class RunOptions(TypedDict, total=False):
    """:func:`train_outcome`'s keyword arguments, which :func:`train_run` passes on."""

    resume: bool
    progress: bool
    log: Callable[[str], None]
    timeout: float
    overwrite: bool
    timings: Timings | None


def _train_run(
    config: RunConfig,
    device: torch.device,
    shard: Shard,
    *,
    resume: bool,
    progress: bool,
    log: Callable[[str], None],
    overwrite: bool,
    timings: Timings,
) -> RunOutcome:
    if config.train.threads > 0:
        torch.set_num_threads(config.train.threads)
    recipe_cls, options = get_recipe(config.recipe), check_run_config(config)
    if shard.is_main:  # a folder that is not ours, or an impossible path: refused before any work
        check_folder(config.output_dir, RUN_OUTPUTS, overwrite=overwrite)
    # held before anything is read or encoded: a second run into the folder refuses at once
    with holding(config.output_dir) if shard.is_main else contextlib.nullcontext():
        config = replace(config, data=concrete_source(config.data, log))
        data = load_run_data(config)
        note = planted_noise_note(config, data)
        if note:
            log(note)
        train, noise = training_pairs(config, data)
        test = test_pairs(config) if config.division.score_other_splits else None  # read once
        others = other_splits(config, data, test)
        tokens = data.train_tokens + data.dev_tokens + (others.tokens if others is not None else [])
        # the data read first: a data error stays the only line
        model = from_main(shard, lambda: concrete_precision(config.model, config.data, log))
        config = replace(config, model=model)
        with main_first(shard):  # rank 0 fills the text cache, the others read it
            prepare_text_encoder(config.model, config.data, tokens, progress=progress, log=log)
        check_data_fits(config, data)
        if shard.is_main:
            claim_folder(config.output_dir, "train", RUN_OUTPUTS, overwrite=overwrite)
        out_dir = ensure_directory(config.output_dir)
        pairing = None if data.noise is None else data.noise.image_of_caption
        inputs = lambda: run_inputs([data.train, data.dev], pairing, others)  # noqa: E731
        from_main(shard, lambda: check_resume(out_dir, config, resume, inputs(), log))  # rank 0 only
        timings.lap("reading")
        context, scores = recipe_context(config, data, train, noise, others, device, out_dir, progress, shard)
        timings.lap("division")
        models = build_models(config, recipe_cls.n_models, data, device)
        summary, best = _train(
            config,
            recipe_cls(models, options, context),
            data,
            out_dir,
            test,
            resume=resume,
            progress=progress,
            log=log,
        )
        timings.lap("training")
        return RunOutcome(summary, scores, data, others, best)


def _train(
    config: RunConfig,
    recipe: Recipe,
    data: RunData,
    out_dir: Path,
    test: PairSet | None,
    *,
    resume: bool,
    progress: bool,
    log: Callable[[str], None],
) -> tuple[TrainSummary, TrainedRun]:
    kind = config.data.noise.protocol if config.data.noise.rate > 0 else "labelled"
    noise_text = f", noise {data.noise.noise_rate:.2f} ({kind})" if data.noise else ""
    log(
        ProgressLine(
            f"{config.recipe} on {data.train.name}: {data.train.n_images} images, "
            f"{data.train.n_captions} captions{noise_text}; device {recipe.context.device}"
        )
    )
    fields = data.checkpoint_fields()
    trainer = Trainer(
        config, recipe, data.dev, data.dev_tokens, out_dir, extra_state=fields, progress=progress, log=log
    )
    result: TrainResult = trainer.fit(resume=resume)
    shard = recipe.context.shard
    best = TrainedRun.open(out_dir / "best.pt", recipe.context.device).trained_on(data)  # opened once
    test_split = test_pairs(config) if test is None else test
    metrics = evaluate_runs([best], test_split, device=best.device, progress=progress, shard=shard)
    noise = config.data.noise
    planted = PlantedNoise(noise.rate, noise.protocol, noise.seed) if noise.rate > 0 else None
    summary = TrainSummary(result.best_epoch, result.best_dev, metrics, planted)
    if shard.is_main:
        write_json(out_dir / "metrics.json", summary.to_dict())
    return summary, best

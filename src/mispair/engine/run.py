"""Train a run from its config, in one process or in each process of a torchrun launch: only the
order of things (the parts come from :mod:`mispair.engine.assembly`, the held-out scores from
:mod:`mispair.engine.pair_scores`, the test metrics from :mod:`mispair.engine.evaluation`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from mispair.atomic import ensure_directory, folder_lock
from mispair.config import RunConfig
from mispair.data.loading import concrete_source
from mispair.distributed import (
    DEFAULT_TIMEOUT,
    Shard,
    from_main,
    main_first,
    main_only,
    process_group,
)
from mispair.engine.assembly import (
    RunData,
    build_models,
    concrete_precision,
    load_run_data,
    other_splits,
    pick_device,
    planted_noise_note,
    prepare_text_encoder,
    training_pairs,
)
from mispair.engine.checks import check_data_fits, check_run_config
from mispair.engine.context import recipe_context
from mispair.engine.evaluation import evaluate_checkpoint
from mispair.engine.inputs import run_inputs
from mispair.engine.run_folder import RUN_OUTPUTS, check_resume, write_json
from mispair.engine.trainer import Trainer, TrainResult
from mispair.methods.base import Recipe, get_recipe
from mispair.output_folder import check_folder, claim_folder
from mispair.timings import Timings


def train_run(
    config: RunConfig,
    *,
    resume: bool = True,
    progress: bool = True,
    log: Callable[[str], None] = print,
    timeout: float = DEFAULT_TIMEOUT,
    overwrite: bool = False,
    timings: Timings | None = None,
) -> dict[str, Any]:
    """Train ``config`` in its output directory, then evaluate the best checkpoint on test.

    The output directory must be new, empty or a run's; ``overwrite`` writes into another folder
    (touching only a run's files; see :func:`~mispair.output_folder.claim_folder`).

    Returns ``{"best_epoch", "dev", "test"}``, also written to ``metrics.json``. In a process
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
) -> dict[str, Any]:
    if config.train.threads > 0:
        torch.set_num_threads(config.train.threads)
    recipe_cls, options = get_recipe(config.recipe), check_run_config(config)
    if shard.is_main:  # a folder that is not ours, or an impossible path: refused before any work
        check_folder(config.output_dir, RUN_OUTPUTS, overwrite=overwrite)
    config = replace(config, data=concrete_source(config.data, log))
    data = load_run_data(config)
    note = planted_noise_note(config, data)
    if note:
        log(note)
    train, noise = training_pairs(config, data)
    others = other_splits(config, data)
    tokens = data.train_tokens + data.dev_tokens + (others.tokens if others is not None else [])
    model = from_main(shard, lambda: concrete_precision(config.model, config.data, log))  # data read first
    config = replace(config, model=model)
    with main_first(shard):  # rank 0 fills the text cache, the others read it
        prepare_text_encoder(config.model, config.data, tokens, progress=progress, log=log)
    check_data_fits(config, data)
    if shard.is_main:
        claim_folder(config.output_dir, "train", RUN_OUTPUTS, overwrite=overwrite)
    out_dir = ensure_directory(config.output_dir)
    with folder_lock(out_dir) if shard.is_main else contextlib.nullcontext():  # one run per output folder
        pairing = None if data.noise is None else data.noise.image_of_caption
        inputs = lambda: run_inputs([data.train, data.dev], pairing, others)  # noqa: E731
        from_main(shard, lambda: check_resume(out_dir, config, resume, inputs(), log))  # rank 0 only
        timings.lap("reading")
        context = recipe_context(config, data, train, noise, others, device, out_dir, progress, shard)
        timings.lap("division")
        models = build_models(config, recipe_cls.n_models, data, device)
        summary = _train(
            config,
            recipe_cls(models, options, context),
            data,
            out_dir,
            resume=resume,
            progress=progress,
            log=log,
        )
        timings.lap("training")
        return summary


def _train(
    config: RunConfig,
    recipe: Recipe,
    data: RunData,
    out_dir: Path,
    *,
    resume: bool,
    progress: bool,
    log: Callable[[str], None],
) -> dict[str, Any]:
    kind = config.data.noise.protocol if config.data.noise.rate > 0 else "labelled"
    noise_text = f", noise {data.noise.noise_rate:.2f} ({kind})" if data.noise else ""
    log(
        f"{config.recipe} on {data.train.name}: {data.train.n_images} images, "
        f"{data.train.n_captions} captions{noise_text}; device {recipe.context.device}"
    )
    fields = data.checkpoint_fields()
    trainer = Trainer(
        config, recipe, data.dev, data.dev_tokens, out_dir, extra_state=fields, progress=progress, log=log
    )
    result: TrainResult = trainer.fit(resume=resume)
    shard = recipe.context.shard
    test = evaluate_checkpoint(out_dir / "best.pt", progress=progress, shard=shard)
    summary = {"best_epoch": result.best_epoch, "dev": result.best_dev, "test": test}
    if config.data.noise.rate > 0:
        summary["planted_noise"] = {
            "rate": config.data.noise.rate,
            "protocol": config.data.noise.protocol,
            "seed": config.data.noise.seed,
        }
    if shard.is_main:
        write_json(out_dir / "metrics.json", summary)
    return summary

"""Train a run from its config and evaluate checkpoints (the parts come from
:mod:`mispair.engine.assembly`), in one process or in each process of a torchrun launch."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from mispair.atomic import atomic_text, ensure_directory, folder_lock
from mispair.config import RunConfig, from_dict
from mispair.data.batching import TrainingPairs
from mispair.data.loading import concrete_source, load_split
from mispair.distributed import (
    DEFAULT_TIMEOUT,
    SINGLE_PROCESS,
    Shard,
    from_main,
    main_first,
    main_only,
    process_group,
)
from mispair.engine.assembly import (
    RunData,
    build_models,
    check_model_inputs,
    checkpoint_tokens,
    load_models,
    load_run_data,
    model_pairs,
    other_splits,
    pick_device,
    prepare_text_encoder,
)
from mispair.engine.checkpoint import load_checkpoint
from mispair.engine.evaluation import evaluate_split
from mispair.engine.export import PAIR_SCORES_FILE
from mispair.engine.inputs import INPUTS_FILE, changed, run_inputs
from mispair.engine.pair_scores import division_scores
from mispair.engine.trainer import Trainer, TrainResult
from mispair.errors import ConfigError, DataError
from mispair.methods.base import Recipe, RecipeContext, build_options, get_recipe
from mispair.nn.heads import create_head, head_options
from mispair.options import build_dataclass
from mispair.output_folder import check_folder, claim_folder
from mispair.safe_io import refuse_planted
from mispair.safe_parse import load_json


def train_run(
    config: RunConfig,
    *,
    resume: bool = True,
    progress: bool = True,
    log: Callable[[str], None] = print,
    timeout: float = DEFAULT_TIMEOUT,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Train ``config`` in its output directory, then evaluate the best checkpoint on test.

    The output directory must be new, empty or a run's; ``overwrite`` writes into another folder
    (touching only a run's files; see :func:`~mispair.output_folder.claim_folder`).

    Returns ``{"best_epoch", "dev", "test"}``, also written to ``metrics.json``. In a process
    started by torchrun, every process of the launch calls it and trains its share of each batch
    (:func:`~mispair.distributed.process_group`; collectives fail after ``timeout`` seconds);
    only rank 0 logs and writes files, and every process returns the same summary.
    """
    device = pick_device(config.train.device)
    with process_group(device, timeout) as (shard, device):
        return _train_run(config, device, shard, resume=resume, progress=progress, log=main_only(shard, log),
                          overwrite=overwrite)


def check_run_config(config: RunConfig) -> Any:
    """Every free-form option of ``config`` checked against its type before anything is written:
    the recipe's (``method``), the head's and the scorers' (``division.scorer``); returns the
    recipe's options."""
    recipe_cls = get_recipe(config.recipe)
    options = build_options(recipe_cls, config.method)
    head_options(config.model.head, config.model.head_options)
    build_dataclass(get_recipe("vse").Options, config.division.scorer, "division.scorer")
    if recipe_cls.needs_pair_scores and config.division.scores == "in_sample":
        raise ConfigError(f"recipe {config.recipe}: needs held-out pair scores "
                          "(division.scores: out_of_fold or early)")  # fmt: skip
    return options


def _train_run(config: RunConfig, device: torch.device, shard: Shard, *, resume: bool, progress: bool,
               log: Callable[[str], None], overwrite: bool) -> dict[str, Any]:  # fmt: skip
    if config.train.threads > 0:
        torch.set_num_threads(config.train.threads)
    recipe_cls, options = get_recipe(config.recipe), check_run_config(config)
    if shard.is_main:  # a folder that is not ours, or an impossible path: refused before any work
        check_folder(config.output_dir, RUN_OUTPUTS, overwrite=overwrite)
    config = replace(config, data=concrete_source(config.data, log))
    data = load_run_data(config)
    _announce_planted_noise(config, data, log)
    if config.data.noise.oracle and data.noise is None:
        raise ConfigError("data.noise.oracle: needs a noise record (data.noise.rate > 0 or data.noise.file)")
    others = other_splits(config, data)
    tokens = data.train_tokens + data.dev_tokens + (others.tokens if others is not None else [])
    with main_first(shard):  # rank 0 fills the text cache, the others read it
        prepare_text_encoder(config.model, config.data, tokens, progress=progress, log=log)
    _check_data_fits(config, data)
    if shard.is_main:
        claim_folder(config.output_dir, "train", RUN_OUTPUTS, overwrite=overwrite)
    out_dir = ensure_directory(config.output_dir)
    with folder_lock(out_dir) if shard.is_main else contextlib.nullcontext():  # one run per output folder
        pairing = None if data.noise is None else data.noise.image_of_caption
        inputs = lambda: run_inputs([data.train, data.dev], pairing, others)  # noqa: E731 (rank 0 only)
        from_main(shard, lambda: _check_resume_config(out_dir, config, resume, inputs(), log))
        context = _context(config, data, others, device, out_dir, progress, shard)
        models = build_models(config, recipe_cls.n_models, data, device)
        return _train(config, recipe_cls(models, options, context), data, out_dir, resume=resume,
                      progress=progress, log=log)  # fmt: skip


def _check_data_fits(config: RunConfig, data: RunData) -> None:
    """The head fits the data's fragments, checked before anything is written (its head alone is
    built, off the run's random stream, so the run's draws stay as they were)."""
    with torch.random.fork_rng(devices=[]):
        head = create_head(config.model.head, config.model.embed_dim, **config.model.head_options)
    check_model_inputs(SimpleNamespace(head=head), data.train.feature_dim, data.train)  # reads .head only


def _announce_planted_noise(config: RunConfig, data: RunData, log: Callable[[str], None]) -> None:
    """Planted noise changes the user's pairs: said in the first lines, never silently."""
    noise = config.data.noise
    if noise.rate > 0 and data.noise is not None:
        swapped = int(data.noise.is_noisy.sum())
        log(f"note: planting mismatched pairs into the training split as data.noise asks: {swapped} of "
            f"{data.train.n_captions} captions swapped ({noise.protocol}, rate {noise.rate}, seed "
            f"{noise.seed}); recorded in the run's config.json and metrics.json")  # fmt: skip


def _context(config: RunConfig, data: RunData, others: TrainingPairs | None, device: torch.device,
             out_dir: Path, progress: bool, shard: Shard) -> RecipeContext:  # fmt: skip
    paired = None if data.noise is None else data.noise.image_of_caption
    train, noise = TrainingPairs(data.train, data.train_tokens, paired), data.noise
    if config.data.noise.oracle and noise is not None:  # the bound: the truly clean pairs alone
        clean = np.flatnonzero(~noise.is_noisy)
        train, noise = TrainingPairs(data.train, [data.train_tokens[k] for k in clean], paired[clean]), None
    scores = division_scores(config, data, train, device, cache=out_dir / PAIR_SCORES_FILE, progress=progress,
                             shard=shard, others=others)  # fmt: skip
    return RecipeContext(
        train=train.sharded(shard),
        batch_size=config.train.batch_size,
        epochs=config.train.epochs,
        device=device,
        seed=config.train.seed,
        eval_batch_size=config.train.eval_batch_size,
        noise=noise,
        pair_scores=None if scores is None else scores.train,
    )


RUN_OUTPUTS = ("config.json", INPUTS_FILE, "last.pt", "best.pt", "log.jsonl", "metrics.json",
               PAIR_SCORES_FILE, str(Path(PAIR_SCORES_FILE).with_suffix(".folds")))  # fmt: skip
"""What a run writes into its folder (and nothing else there is touched)."""


def _train(config: RunConfig, recipe: Recipe, data: RunData, out_dir: Path, *, resume: bool,
           progress: bool, log: Callable[[str], None]) -> dict[str, Any]:  # fmt: skip
    kind = config.data.noise.protocol if config.data.noise.rate > 0 else "labelled"
    noise_text = f", noise {data.noise.noise_rate:.2f} ({kind})" if data.noise else ""
    log(f"{config.recipe} on {data.train.name}: {data.train.n_images} images, "
        f"{data.train.n_captions} captions{noise_text}; device {recipe.context.device}")  # fmt: skip
    trainer = Trainer(config, recipe, data.dev, data.dev_tokens, out_dir,
                      extra_state=data.checkpoint_fields(), progress=progress, log=log)  # fmt: skip
    result: TrainResult = trainer.fit(resume=resume)
    shard = recipe.context.shard
    test = evaluate_checkpoint(out_dir / "best.pt", progress=progress, shard=shard)
    summary = {"best_epoch": result.best_epoch, "dev": result.best_dev, "test": test}
    if config.data.noise.rate > 0:
        summary["planted_noise"] = {"rate": config.data.noise.rate, "protocol": config.data.noise.protocol,
                                    "seed": config.data.noise.seed}  # fmt: skip
    if shard.is_main:
        _write_json(out_dir / "metrics.json", summary)
    return summary


def _check_resume_config(out_dir: Path, config: RunConfig, resume: bool, inputs: dict[str, Any],
                         log: Callable[[str], None]) -> None:  # fmt: skip
    """Refuse to resume a run whose saved config differs (a silent mix of two runs); train again,
    saying why, a run whose collection or mispair version changed (its results would be stale)."""
    saved = out_dir / "config.json"
    current = config.to_dict()
    has_run = resume and (out_dir / "last.pt").is_file()
    if has_run and saved.is_file():
        previous = load_json(saved.read_bytes(), saved)
        if not isinstance(previous, dict):
            raise DataError(f"{saved}: a damaged run config (not a mapping); rerun with --no-resume")
        if previous != current:
            changed_keys = sorted(k for k in current if previous.get(k) != current[k])
            raise ConfigError(
                f"{out_dir}: holds a run with a different config (differs in: {', '.join(changed_keys)}); "
                "use another output folder (--out), or --no-resume to start over"
            )
    why = changed(_saved_inputs(out_dir), inputs) if has_run else ""
    if why and (out_dir / INPUTS_FILE).is_file():
        log(f"note: {out_dir}: {why} since its run; training it again (its model and scores are stale)")
        resume = False
    elif why:
        log(f"note: reusing the run in {out_dir}, which records no digest of its inputs (an older mispair "
            "wrote it); --no-resume trains it again")  # fmt: skip
    refuse_planted(out_dir / "log.jsonl")  # appended to: a link there is refused before any work
    if not resume:
        for name in ("last.pt", "best.pt", "log.jsonl", "metrics.json", PAIR_SCORES_FILE):
            (out_dir / name).unlink(missing_ok=True)
        shutil.rmtree(out_dir / Path(PAIR_SCORES_FILE).with_suffix(".folds"), ignore_errors=True)
    _write_json(saved, current)
    if not why or not resume:
        _write_json(out_dir / INPUTS_FILE, inputs)


def _saved_inputs(out_dir: Path) -> Any:
    path = out_dir / INPUTS_FILE
    return load_json(path.read_bytes(), path) if path.is_file() else None


def _write_json(path: Path, data: Any) -> None:
    atomic_text(path, json.dumps(data, indent=2) + "\n")


def evaluate_checkpoint(
    path: str | Path | Sequence[str | Path],
    *,
    split: str | None = None,
    data_root: str | None = None,
    folds: int | None = None,
    device: str = "auto",
    progress: bool = False,
    shard: Shard = SINGLE_PROCESS,
) -> dict[str, float]:
    """Retrieval metrics of a checkpoint's models on a split (default: the config's test split).

    Several checkpoints (e.g. an SGR and a SAF run, for SGRAF) are evaluated on their averaged
    similarities; the data and tokenizer come from the first one's config. Every rank of a
    multi-process run (``shard``) calls it and scores its block of the images.
    """
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    states = [load_checkpoint(p) for p in paths]
    config = from_dict(states[0]["config"])
    if data_root:
        config.data.root, config.data.source = data_root, "auto"
    pairs = model_pairs(config.model, load_split(config.data, split or config.data.test_split))
    dev = pick_device(device, "--device")
    models = [m for p, state in zip(paths, states) for m in load_models(state, dev, str(p))]
    for model, state in zip(models, states):
        check_model_inputs(model, state["feature_dim"], pairs)
    tokens = checkpoint_tokens(states[0], pairs)
    prepare_text_encoder(config.model, config.data, tokens, progress=progress, log=lambda _: None)
    for other, state in zip(paths[1:], states[1:]):
        if checkpoint_tokens(state, pairs) != tokens:
            raise ConfigError(f"{other}: tokenizes captions differently from {paths[0]}")
    return evaluate_split(models, pairs, tokens, folds=folds or config.data.test_folds,
                          batch_size=config.train.eval_batch_size, device=dev, progress=progress,
                          shard=shard)  # fmt: skip

"""A run's output folder: what a run writes there, and whether a rerun may resume what it holds.

A rerun resumes only a run of the same config (else a one-line error), and trains again, saying
why, a run whose collection or mispair version changed since (its model and scores would be
stale: :mod:`mispair.engine.inputs`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mispair.atomic import atomic_text
from mispair.config import RunConfig, from_dict
from mispair.division.scores import PAIR_SCORES_FILE
from mispair.engine.inputs import INPUTS_FILE, changed
from mispair.errors import ConfigError, DataError
from mispair.safe_io import refuse_planted
from mispair.safe_parse import load_json

RUN_OUTPUTS = (
    "config.json",
    INPUTS_FILE,
    "last.pt",
    "best.pt",
    "log.jsonl",
    "metrics.json",
    PAIR_SCORES_FILE,
    str(Path(PAIR_SCORES_FILE).with_suffix(".folds")),
    "input.parquet",
    "input_dataset",
)
"""What a run writes into its folder (and nothing else there is touched; ``input.parquet``: the
DataFrame ``mispair.train`` was given, ``input_dataset``: the Hugging Face Dataset)."""


def check_resume(
    out_dir: Path, config: RunConfig, resume: bool, inputs: dict[str, Any], log: Callable[[str], None]
) -> None:
    """Refuse to resume a run whose saved config differs (a silent mix of two runs); train again,
    saying why, a run whose collection or mispair version changed (its results would be stale);
    then record the config and the inputs."""
    saved = out_dir / "config.json"
    current = config.to_dict()
    has_run = resume and (out_dir / "last.pt").is_file()
    if has_run and saved.is_file():
        previous = load_json(saved.read_bytes(), saved)
        if not isinstance(previous, dict):
            raise DataError(f"{saved}: a damaged run config (not a mapping); rerun with --no-resume")
        previous = _as_read_now(previous)
        if _compared(previous) != _compared(current):
            differing = sorted(k for k in current if k != "output" and previous.get(k) != current[k])
            raise ConfigError(
                f"{out_dir}: holds a run with a different config (differs in: {', '.join(differing)}); "
                "use another output folder (--out), or --no-resume to start over"
            )
    why = changed(_saved_inputs(out_dir), inputs) if has_run else ""
    if why and (out_dir / INPUTS_FILE).is_file():
        log(f"note: {out_dir}: {why} since its run; training it again (its model and scores are stale)")
        resume = False
    elif why:
        log(
            f"note: reusing the run in {out_dir}, which records no digest of its inputs (an older mispair "
            "wrote it); --no-resume trains it again"
        )
    refuse_planted(out_dir / "log.jsonl")  # appended to: a link there is refused before any work
    if not resume:
        for name in ("last.pt", "best.pt", "log.jsonl", "metrics.json", PAIR_SCORES_FILE):
            (out_dir / name).unlink(missing_ok=True)
        shutil.rmtree(out_dir / Path(PAIR_SCORES_FILE).with_suffix(".folds"), ignore_errors=True)
    write_json(saved, current)
    if not why or not resume:
        write_json(out_dir / INPUTS_FILE, inputs)


def _compared(record: dict[str, Any]) -> dict[str, Any]:
    """A config as two runs of one folder are compared: without ``output``, which only names the
    folder the run is in (``runs/x`` and ``/home/me/runs/x`` are one folder: this one)."""
    return {key: value for key, value in record.items() if key != "output"}


def _as_read_now(record: dict[str, Any]) -> dict[str, Any]:
    """A saved config as this version reads it (renamed keys, new defaults), else as saved."""
    with warnings.catch_warnings(), contextlib.suppress(ConfigError):
        warnings.simplefilter("ignore", FutureWarning)
        return from_dict(record).to_dict()
    return record


def _saved_inputs(out_dir: Path) -> Any:
    path = out_dir / INPUTS_FILE
    return load_json(path.read_bytes(), path) if path.is_file() else None


def write_json(path: Path, data: Any) -> None:
    atomic_text(path, json.dumps(data, indent=2) + "\n")

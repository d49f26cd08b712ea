"""Tiny runs of every recipe (synthetic data, 20% noise, three epochs of twenty steps), shared by the
single-process golden test and the multi-process tests."""

from __future__ import annotations

import json
from pathlib import Path

from mispair.config import RunConfig, load_config

BASE = [
    "data.source=synthetic",
    "data.synthetic_images=200",
    "data.noise.rate=0.2",
    "model.head=cosine",
    "model.text_encoder=bigru",
    "model.image_pooling=fragments",
    "model.embed_dim=32",
    "model.word_dim=16",
    "train.epochs=3",
    "train.batch_size=50",
    "train.threads=1",
    "train.lr=5e-3",
    "train.lr_decay_epochs=[2]",
    "train.eval_batch_size=128",
]

RECIPES: dict[str, list[str]] = {
    "vse": [],
    "rcl": ["recipe=rcl", "method.tau=0.2"],
    "ncr": ["recipe=ncr", "method.warmup_epochs=1"],
    "asl": ["recipe=asl", "method.warmup_epochs=1"],
    "pc2": ["recipe=pc2", "method.warmup_epochs=1", "method.n_classes=8"],
    "l2rm": ["recipe=l2rm", "method.warmup_epochs=1"],
    "holdout": [
        "recipe=holdout",
        "method.loss=triplet",
        "method.tau=0.05",
        "division.scored_by=out_of_fold",
        "division.folds=2",
        "division.epochs=1",
    ],  # the defaults up to issue 16's InfoNCE
    "omit": ["recipe=omit"],
}


def tiny_config(recipe: str, out: str | Path, extra: tuple[str, ...] = ()) -> RunConfig:
    """The tiny run of ``recipe`` writing to ``out``."""
    return load_config(None, [*BASE, *RECIPES[recipe], *extra, f"output={out}"])


def log_rows(out: str | Path) -> list[dict]:
    """The run's ``log.jsonl`` without its timings."""
    lines = (Path(out) / "log.jsonl").read_text(encoding="utf-8").splitlines()
    return [{k: v for k, v in json.loads(line).items() if not k.startswith("seconds")} for line in lines]

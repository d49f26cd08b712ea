"""Training cost per epoch of every recipe relative to ``vse``, measured side by side in one run.

Each recipe trains through the real pipeline (:func:`mispair.engine.run.train_run`) with its
``configs/<recipe>/<dataset>.yaml`` settings, ``pmp`` noise, the same seed, ``--warmup`` warm-up
epochs (for the recipes that have one) and ``--epochs`` timed epochs after it. Timed per epoch:
the training pass and, apart, the recipe's ``begin_epoch`` (the division: scoring every pair and
fitting the mixtures), as the run's ``log.jsonl`` records them (``seconds/train``,
``seconds/division``). Evaluation and checkpointing are not counted. Rounds repeat the whole
list (``--repeats``) and the medians are printed, so a busy machine slows every recipe alike.

    python benchmarks/bench_epoch_cost.py --dataset tuxpaint --variants vse-triplet rcl-log rcl-gce
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import torch

from compare_recipes import VARIANTS
from mispair.config import load_config
from mispair.engine.run import train_run


def epoch_seconds(dataset: str, variant: str, args: argparse.Namespace) -> dict[str, float]:
    """Mean seconds per timed epoch of the training pass and of the division, from the run's
    ``log.jsonl`` (``seconds/train``, ``seconds/division``)."""
    recipe, overrides = VARIANTS[variant]
    with tempfile.TemporaryDirectory() as out:
        config = load_config(
            f"configs/{recipe}/{dataset}.yaml",
            [
                *overrides,
                f"data.noise.rate={args.noise}",
                "data.noise.protocol=pmp",
                "train.seed=0",
                f"train.threads={args.threads}",
                f"output={out}",
            ],
        )
        warmup = args.warmup if "warmup_epochs" in config.method else 0
        if warmup:
            config.method["warmup_epochs"] = warmup
        config.train.epochs = warmup + args.epochs
        train_run(config, progress=False, log=lambda m: None)
        rows = [json.loads(line) for line in (Path(out) / "log.jsonl").read_text().splitlines()]
    timed = rows[warmup:]
    return {key: statistics.mean(r[f"seconds/{key}"] for r in timed) for key in ("train", "division")}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="tuxpaint")
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=VARIANTS,
        default=["vse-triplet", "vse-infonce", "rcl-log", "rcl-gce", "l2rm", "ncr"],
    )
    parser.add_argument("--noise", type=float, default=0.4)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs after the warm-up")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    found: dict[str, list[dict[str, float]]] = {v: [] for v in args.variants}
    for _ in range(args.repeats):
        for variant in args.variants:
            found[variant].append(epoch_seconds(args.dataset, variant, args))
    median = {v: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for v, runs in found.items()}
    base = median[args.variants[0]]["train"]
    print(
        f"{args.dataset}, pmp {args.noise:g}, {args.threads} thread(s); median of {args.repeats} "
        f"rounds, each the mean of {args.epochs} epoch(s) after {args.warmup} warm-up; "
        f"ratios vs {args.variants[0]}"
    )
    print(f"{'variant':>14} {'train s/epoch':>14} {'ratio':>6} {'division s':>11} {'total ratio':>12}")
    for variant, parts in median.items():
        train, division = parts["train"], parts["division"]
        print(
            f"{variant:>14} {train:14.2f} {train / base:6.2f} {division:11.2f} "
            f"{(train + division) / base:12.2f}"
        )


if __name__ == "__main__":
    main()

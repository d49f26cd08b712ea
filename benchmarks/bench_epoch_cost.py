"""Training cost per epoch of every recipe relative to ``vse``, measured side by side in one run.

Each recipe trains through the real pipeline (:func:`mispair.engine.run.train_run`) with its
``configs/<recipe>/<dataset>.yaml`` settings, ``pmp`` noise, the same seed, ``--warmup`` warm-up
epochs (for the recipes that have one) and ``--epochs`` timed epochs after it. Timed per epoch:
the training pass (``Trainer._train_epoch``) and, apart, the recipe's ``begin_epoch`` (the
division: scoring every pair and fitting the mixtures). Evaluation and checkpointing are not
counted. Rounds repeat the whole list (``--repeats``) and the medians are printed, so a busy
machine slows every recipe alike.

    python benchmarks/bench_epoch_cost.py --dataset tuxpaint --variants vse-triplet rcl-log rcl-gce
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from compare_recipes import VARIANTS
from mispair.config import load_config
from mispair.engine.run import train_run
from mispair.engine.trainer import Trainer
from mispair.methods import get_recipe


@contextmanager
def timers(targets: list[tuple[type, str]]) -> Iterator[dict[str, float]]:
    """Accumulate the wall time of each ``cls.method`` (keyed by method name) while the block runs."""
    spent: dict[str, float] = defaultdict(float)
    originals = [(cls, name, cls.__dict__[name]) for cls, name in targets]

    def wrap(label, fn):
        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[label] += time.perf_counter() - began

        return timed

    for cls, name, fn in originals:
        setattr(cls, name, wrap(name, fn))
    try:
        yield spent
    finally:
        for cls, name, fn in originals:
            setattr(cls, name, fn)


def epoch_seconds(dataset: str, variant: str, args: argparse.Namespace) -> dict[str, float]:
    """Mean seconds per timed epoch of the training pass and of the division."""
    recipe, overrides = VARIANTS[variant]
    cls = get_recipe(recipe)
    with tempfile.TemporaryDirectory() as out:
        config = load_config(f"configs/{recipe}/{dataset}.yaml", [
            *overrides, f"data.noise.rate={args.noise}", "data.noise.protocol=pmp", "train.seed=0",
            f"train.threads={args.threads}", f"output={out}"])  # fmt: skip
        warmup = args.warmup if "warmup_epochs" in config.method else 0
        if warmup:
            config.method["warmup_epochs"] = warmup
        config.train.epochs = warmup + args.epochs
        owner = next(k for k in cls.__mro__ if "begin_epoch" in k.__dict__)  # e.g. CoTraining
        targets = [(Trainer, "_train_epoch"), (owner, "begin_epoch")]
        per_epoch: list[dict[str, float]] = []
        with timers(targets) as spent:
            original = Trainer._train_epoch  # the timed wrapper

            def snapshot(self, epoch):
                losses = original(self, epoch)
                per_epoch.append(dict(spent))
                return losses

            Trainer._train_epoch = snapshot
            try:
                train_run(config, progress=False, log=lambda m: None)
            finally:
                Trainer._train_epoch = original
    first, last = (per_epoch[warmup - 1] if warmup else {}), per_epoch[-1]
    return {k: (last.get(k, 0.0) - first.get(k, 0.0)) / args.epochs
            for k in ("_train_epoch", "begin_epoch")}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="tuxpaint")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS,
                        default=["vse-triplet", "vse-infonce", "rcl-log", "rcl-gce", "l2rm", "ncr"])
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
    base = median[args.variants[0]]["_train_epoch"]
    print(f"{args.dataset}, pmp {args.noise:g}, {args.threads} thread(s); median of {args.repeats} "
          f"rounds, each the mean of {args.epochs} epoch(s) after {args.warmup} warm-up; "
          f"ratios vs {args.variants[0]}")  # fmt: skip
    print(f"{'variant':>14} {'train s/epoch':>14} {'ratio':>6} {'division s':>11} {'total ratio':>12}")
    for variant, parts in median.items():
        train, division = parts["_train_epoch"], parts["begin_epoch"]
        print(f"{variant:>14} {train:14.2f} {train / base:6.2f} {division:11.2f} "
              f"{(train + division) / base:12.2f}")  # fmt: skip


if __name__ == "__main__":
    main()

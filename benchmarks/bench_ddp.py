"""Seconds per epoch of ``vse`` and ``ncr`` in one process and in two (``mispair train --nproc 2``,
Gloo on the CPU), measured side by side in one run.

Each run is the real command, ``python -m mispair train configs/<recipe>/<dataset>.yaml --nproc N
--quiet``, with ``--epochs`` epochs (``ncr``: after a one-epoch warm-up, which is not timed), and
reads its ``log.jsonl``: the training pass (``seconds/train``), the division (``seconds/division``:
each rank scores its share of the batches, rank 0 fits the mixtures), the dev evaluation
(``seconds/eval``: each rank scores a block of the images) and the whole epoch. Three settings on
the same machine: one process on one thread, one process on two threads, two processes on one
thread each (torchrun's default). Rounds repeat every setting (``--repeats``; medians printed), so a
busy machine slows each alike. On two cores the scaling is small: the numbers show DDP's overhead
(a gradient all-reduce per update, a collective per division and evaluation) against the halved
work per process.

    python benchmarks/bench_ddp.py --dataset openclipart --epochs 2 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SETTINGS = {"1 process, 1 thread": (1, 1), "1 process, 2 threads": (1, 2), "2 processes, 1 thread": (2, 1)}
PARTS = ("train", "division", "eval")


def epoch_seconds(recipe: str, dataset: str, nproc: int, threads: int, epochs: int) -> dict[str, float]:
    """Mean seconds per timed epoch of each part (and ``epoch``, the whole), and ``wall``: the
    command's wall-clock time including start-up."""
    warmup = 1 if recipe == "ncr" else 0
    with tempfile.TemporaryDirectory() as out:
        command = [
            sys.executable,
            "-m",
            "mispair",
            "train",
            f"configs/{recipe}/{dataset}.yaml",
            "--quiet",
            "--out",
            out,
            "--nproc",
            str(nproc),
            f"train.epochs={warmup + epochs}",
            f"train.threads={threads}",
            "train.seed=0",
        ]
        if warmup:
            command.append(f"method.warmup_epochs={warmup}")
        began = time.perf_counter()
        subprocess.run(
            command,
            check=True,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "OMP_NUM_THREADS": str(threads)},
        )
        wall = time.perf_counter() - began
        rows = [json.loads(line) for line in (Path(out) / "log.jsonl").read_text().splitlines()][warmup:]
    found = {part: statistics.mean(r[f"seconds/{part}"] for r in rows) for part in PARTS}
    return {**found, "epoch": statistics.mean(r["seconds"] for r in rows), "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="openclipart", choices=("tuxpaint", "openclipart"))
    parser.add_argument("--recipes", nargs="+", default=["vse", "ncr"])
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs (after ncr's warm-up)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    found: dict[tuple[str, str], list[dict[str, float]]] = {}
    load = [os.getloadavg()[0]]  # other jobs on the machine slow every setting, two processes most
    for _ in range(args.repeats):
        for recipe in args.recipes:
            for name, (nproc, threads) in SETTINGS.items():
                seconds = epoch_seconds(recipe, args.dataset, nproc, threads, args.epochs)
                found.setdefault((recipe, name), []).append(seconds)
                load.append(os.getloadavg()[0])
    warmup = " after a 1-epoch warm-up (ncr)" if "ncr" in args.recipes else ""
    print(
        f"{args.dataset}, configs/<recipe>/{args.dataset}.yaml; median of {args.repeats} rounds, each "
        f"the mean of {args.epochs} epoch(s){warmup}; {os.cpu_count()} CPU cores, load average "
        f"{min(load):.1f}–{max(load):.1f} during the runs; ratio: epoch time vs 1 process, "
        "1 thread"
    )
    print(
        f"{'recipe':>7} {'setting':>22} {'train s':>8} {'division s':>11} {'eval s':>7} {'epoch s':>8} "
        f"{'ratio':>6} {'wall s':>7}"
    )
    for recipe in args.recipes:
        base = statistics.median(r["epoch"] for r in found[(recipe, next(iter(SETTINGS)))])
        for name in SETTINGS:
            m = {k: statistics.median(r[k] for r in found[(recipe, name)]) for k in (*PARTS, "epoch", "wall")}
            print(
                f"{recipe:>7} {name:>22} {m['train']:8.2f} {m['division']:11.2f} {m['eval']:7.2f} "
                f"{m['epoch']:8.2f} {m['epoch'] / base:6.2f} {m['wall']:7.1f}"
            )


if __name__ == "__main__":
    main()

"""How fast ``mispair estimate`` answers on a large audit: an audit folder of ``--pairs`` pairs
(100,000 by default: a table with the audit's columns, its random sample, written as an audit
writes them; no training) and a labels file of the first ``--answers`` pairs of its sample, then
``mispair estimate AUDIT --labels FILE`` (and with ``--fdr 0.1``) in a fresh process ``--runs``
times: the wall time from the process's start to its exit, median and spread.

    python benchmarks/bench_estimate.py [--pairs 100000] [--answers 200] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_audit(folder: Path, pairs: int, answers: int, seed: int = 0) -> Path:
    """An audit folder of ``pairs`` pairs (mismatch probabilities of a fair scorer over a 30%
    mismatched truth) and ``labels.csv``: the truth on the first ``answers`` of its sample."""
    import pandas as pd

    from mispair.audit.result import AuditResult, audit_id
    from mispair.audit.summary import AuditSummary
    from mispair.estimate.sample import audit_sample

    rng = np.random.default_rng(seed)
    truth = rng.random(pairs) < 0.3
    p = 1 / (1 + np.exp(-rng.normal(2.0 * (2 * truth - 1), 1.5)))
    table = pd.DataFrame(
        {
            "pair_id": [f"train/{k}" for k in range(pairs)],
            "split": "train",
            "image_id": [f"pictures/{k // 5}.png" for k in range(pairs)],
            "caption": [f"a caption number {k}" for k in range(pairs)],
            "mismatch_probability": p.round(6),
            "suspected": p >= 0.9,
            "held_out_score": -p,
        }
    )
    order = np.argsort(-p, kind="stable")
    table = table.iloc[order].reset_index(drop=True).assign(rank=np.arange(1, pairs + 1))
    summary = AuditSummary(collection=str(folder), threshold=0.9, pairs=pairs, audit_id=audit_id(table))
    summary.sample_seed = seed
    sample = audit_sample(table, seed, summary.audit_id or "")
    AuditResult(table, summary, "", sample=sample).save(folder)
    judged = sample["pair_id"].head(answers)
    truth_of = dict(zip(table["pair_id"], truth[order]))
    labels = pd.DataFrame(
        {"pair_id": judged, "label": ["mismatched" if truth_of[i] else "correct" for i in judged]}
    )
    labels.to_csv(folder / "labels.csv", index=False)
    return folder


def timed(argv: list[str], runs: int) -> list[float]:
    subprocess.run(argv, check=True, capture_output=True)  # warm the file cache
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--answers", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-estimate-") as tmp:
        folder = write_audit(Path(tmp) / "audit", args.pairs, args.answers)
        base = [
            sys.executable,
            "-m",
            "mispair",
            "estimate",
            str(folder),
            "--labels",
            str(folder / "labels.csv"),
        ]
        print(f"# mispair estimate on {args.pairs:,} pairs, {args.answers} answers ({args.runs} runs)\n")
        print("| command | median s | min s | max s |")
        print("|---|---|---|---|")
        for name, extra in (("estimate", []), ("estimate --fdr 0.1", ["--fdr", "0.1"])):
            times = timed(base + extra, args.runs)
            print(f"| {name} | {statistics.median(times):.2f} | {min(times):.2f} | {max(times):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

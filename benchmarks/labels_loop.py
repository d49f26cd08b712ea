"""The loop a person follows, against training on the raw collection: ``holdout`` trained on the
raw pairs, then 100 (and 200) answers on the design's sample of its held-out division
(:mod:`mispair.estimate.design`: the suspects first, answered from the planted truth), then
``holdout`` trained again on the raw pairs with the answers (``mispair train --labels``: the
pairs judged correct trusted, those judged mismatched only on the complementary side, the
held-out scorers following them). Test rSum and the division's AUC on the unanswered pairs, per
noise rate and seed, side by side in one run.

The design's probabilities are the first run's own division (``1 −`` its clean probability; the
suspects its pairs with an estimated false-discovery rate at most 0.1), standing in for a
separate audit of the same pairs (whose held-out scorers are the same recipe's).

    python benchmarks/labels_loop.py > benchmarks/results/labels_loop.md
    python benchmarks/labels_loop.py --rates 0.4 --seeds 0 --answers 100   # a quick look
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "holdout" / "tuxpaint.yaml"


def run(overrides: list[str], out: Path) -> tuple[float, np.ndarray, np.ndarray, list[str]]:
    """Train ``holdout`` with ``overrides`` into ``out``: test rSum, each training pair's clean
    probability and planted truth, and the pair ids the answers name."""
    from mispair.config import load_config
    from mispair.data.batching import TrainingPairs
    from mispair.engine.assembly import load_run_data
    from mispair.engine.export import export_training_pairs
    from mispair.engine.held_out.audit_rows import AuditRows
    from mispair.engine.run import train_run

    config = load_config(str(CONFIG), [*overrides, f"output={out}"])
    summary = train_run(config, progress=False, log=lambda m: None)
    rows = sorted(export_training_pairs(config), key=lambda r: r["caption_index"])
    data = load_run_data(config)
    train = TrainingPairs(data.train, data.train_tokens, data.noise.image_of_caption)
    ids = AuditRows.of(train, None, [config.data.train_split] * len(train)).pair_ids
    clean = np.array([r["clean_prob"] for r in rows])
    truth = np.array([r["truly_mismatched"] for r in rows], dtype=float)
    return float(summary.test["rsum"]), clean, truth, ids


def answers_on_design(
    clean: np.ndarray, truth: np.ndarray, ids: list[str], count: int, seed: int, path: Path
):
    """The first ``count`` pairs of the design's order over the division ``clean``, answered
    from ``truth``, written as a labels file at ``path``; returns the judged mask ``[N]``."""
    from mispair.estimate.sample import sample_order

    p = 1.0 - clean
    ranked = np.argsort(-p, kind="stable")
    fdr = np.cumsum(1 - p[ranked]) / np.arange(1, len(p) + 1)
    within = np.flatnonzero(fdr <= 0.1)
    suspected = np.zeros(len(p), dtype=bool)
    suspected[ranked[: within[-1] + 1 if len(within) else 0]] = True
    order = sample_order(list(ids), seed, p, suspected)["pair_id"].astype(str).tolist()
    position = {pair_id: k for k, pair_id in enumerate(ids)}
    judged = np.zeros(len(ids), dtype=bool)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["pair_id", "label"])
        for pair_id in order[:count]:
            k = position[pair_id]
            judged[k] = True
            writer.writerow([pair_id, "mismatched" if truth[k] else "correct"])
    return judged


def auc(clean: np.ndarray, truth: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(truth, -clean)) if 0 < truth.sum() < len(truth) else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[0.2, 0.4, 0.7])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--answers", type=int, nargs="+", default=[100, 200])
    args = parser.parse_args(argv)
    started = time.time()
    print("# The labels loop against the raw collection (`python benchmarks/labels_loop.py`)\n")
    print(f"holdout on Tux Paint ({CONFIG.relative_to(ROOT)}), planted pmp noise; load average at the start ")
    print(f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.\n")
    print(
        "| noise | seed | answers | test rSum raw | test rSum with answers "
        "| AUC raw (unanswered) | AUC with answers (unanswered) |"
    )
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="labels_loop_") as scratch:
        for rate in args.rates:
            for seed in args.seeds:
                base = [f"data.noise.rate={rate}", f"train.seed={seed}", f"data.noise.seed={seed}"]
                raw, clean, truth, ids = run(base, Path(scratch) / f"raw_{rate}_{seed}")
                for count in args.answers:
                    labels = Path(scratch) / f"labels_{rate}_{seed}_{count}.csv"
                    judged = answers_on_design(clean, truth, ids, count, seed, labels)
                    again, clean_after, _, _ = run(
                        [*base, f'division.answers=["{labels}"]'],
                        Path(scratch) / f"loop_{rate}_{seed}_{count}",
                    )
                    before, after = (
                        auc(clean[~judged], truth[~judged]),
                        auc(clean_after[~judged], truth[~judged]),
                    )
                    print(
                        f"| {rate} | {seed} | {count} | {raw:.1f} | {again:.1f} "
                        f"| {before:.3f} | {after:.3f} |",
                        flush=True,
                    )
    print(f"\n{time.time() - started:.0f} s in all.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

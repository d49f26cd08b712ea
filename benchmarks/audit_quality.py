"""How well and how fast ``mispair audit`` finds planted mismatches, beside the detection ceiling.

For each dataset and seed: ``mispair audit`` with ``--plant RATE --seed SEED`` (the default run),
its detection AUC against the planted pairs, the ceiling of the benchmark tables for the same
noise (``benchmarks/results/pretrained/<dataset>_ceiling_n<rate>_s<seed>.json``: out-of-fold
scorers trained on the truly clean pairs only), and the audit's wall time. A finished audit in
``--runs`` is reused (delete the folder to time it again).

    python benchmarks/audit_quality.py --datasets tuxpaint openclipart --seeds 0 1 2 --plant 0.4
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from mispair.audit import audit_collection

RESULTS = Path(__file__).parent / "results"


def ceiling(dataset: str, rate: float, seed: int) -> float | None:
    path = RESULTS / "pretrained" / f"{dataset}_ceiling_n{rate:g}_s{seed}.json"
    return json.loads(path.read_text())["auc"] if path.is_file() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["tuxpaint"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--plant", type=float, default=0.4)
    parser.add_argument("--runs", default="runs/audit_quality")
    parser.add_argument("--out", default=str(RESULTS / "audit_quality.md"))
    args = parser.parse_args()
    lines = [f"# mispair audit with --plant {args.plant}: detection against the ceiling", "",
             "| dataset | seed | pairs | AUC | ceiling | ceiling − AUC | average precision | precision | "
             "recall | estimated share | audit seconds |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for dataset in args.datasets:
        gaps = []
        for seed in args.seeds:
            out = Path(args.runs) / f"{dataset}_p{args.plant:g}_s{seed}"
            started = time.time()
            summary = audit_collection(f"data/{dataset}_precomp", out, plant=args.plant, seed=seed,
                                       progress=False, log=lambda _: None)  # fmt: skip
            seconds = time.time() - started
            d, top = summary["detection"], ceiling(dataset, args.plant, seed)
            gap = "" if top is None else f"{top - d['auc']:.3f}"
            if top is not None:
                gaps.append(top - d["auc"])
            lines.append(f"| {dataset} | {seed} | {summary['pairs']} | {d['auc']:.3f} | "
                         f"{'' if top is None else f'{top:.3f}'} | {gap} | {d['average_precision']:.3f} | "
                         f"{d['precision']:.2f} | {d['recall']:.2f} | "
                         f"{summary['estimated_mismatched_share']:.2f} | {seconds:.0f} |")  # fmt: skip
            print(lines[-1], flush=True)
        if gaps:
            lines.append(f"| {dataset} | mean | | | | {np.mean(gaps):.3f} | | | | | |")
    lines += ["", "Audit seconds: wall time of the whole audit (scoring, training, ranking, report) on this "
              "machine's 2 CPU cores; 0–20 s when a finished run was reused."]  # fmt: skip
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

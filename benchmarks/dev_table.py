"""Variants compared on dev: mean dev rSum (the best epoch's), the last division's detection AUC and
its kept precision / recall, over the seeds every variant has run (:mod:`compare_recipes` JSONs).

What a choice on dev is made from: the test numbers are left out on purpose.

Example (the "tried" list of issue 37 in docs/results.md)::

    python benchmarks/dev_table.py --results benchmarks/results/issue37 --datasets tuxpaint \\
        --noise 0.4 0.7 --seeds 0 1 2 --variants holdout holdout-in2r holdout-gsc
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from fair_grid import load


def detection_value(run: dict, name: str) -> float | None:
    found = [v for k, v in (run.get("detection") or {}).items() if k.endswith(f"/{name}")]
    return found[0] if found else None


def row(runs: list[dict]) -> str:
    """``dev rSum | AUC | precision / recall``, means over ``runs``."""
    cells = [f"{statistics.mean(r['dev']['rsum'] for r in runs):.1f}"]
    values = {n: [detection_value(r, n) for r in runs] for n in ("auc", "precision", "recall")}
    means = {n: statistics.mean(v) if None not in v else None for n, v in values.items()}
    cells.append("" if means["auc"] is None else f"{means['auc']:.3f}")
    kept = means["precision"], means["recall"]
    cells.append("" if None in kept else f"{kept[0]:.2f} / {kept[1]:.2f}")
    return " | ".join(cells)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/issue37"))
    parser.add_argument("--datasets", nargs="+", default=["tuxpaint"])
    parser.add_argument("--noise", nargs="+", type=float, default=[0.4, 0.7])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", required=True)
    args = parser.parse_args()
    print("| dataset | noise | variant | seeds | mean dev rSum | AUC | kept precision / recall |")
    print("|---|---|---|---|---|---|---|")
    for dataset in args.datasets:
        for noise in args.noise:
            for variant in args.variants:
                runs = load(args.results, dataset, variant, noise, args.seeds, [])
                if len(runs) == len(args.seeds):  # only complete variants are compared
                    print(f"| {dataset} | {noise:g} | {variant} | {len(runs)} | {row(runs)} |")


if __name__ == "__main__":
    main()

"""The high-noise table (issue 37): at each noise level, each recipe's share of the gap between the
two-model InfoNCE baseline and the two-model InfoNCE oracle, with its kept-pair precision and recall.

The bounds are ``vse2-infonce`` and ``vse2-oracle-infonce``: the same two averaged models with
``holdout``'s loss, trained on every pair and on the truly clean pairs only. Each comes from
:mod:`compare_recipes`, untuned, over the report seeds. The recipes are taken at their
configuration chosen on dev by :mod:`fair_grid` (equal budget), over the same report seeds;
``--fixed`` variants at their one configuration (:mod:`compare_recipes`, no grid).
``gap closed`` is (rSum − baseline) / (oracle − baseline), computed from the means. ``kept
precision / recall`` is measured at the division's threshold: the share of the pairs kept (clean
probability above ``division.p_threshold``) that are truly matched, and the share of the truly
matched pairs that are kept.

Example (every number of docs/results.md's high-noise table)::

    python benchmarks/compare_recipes.py --datasets tuxpaint openclipart \\
        --variants vse2-infonce vse2-oracle-infonce --noise 0.2 0.4 0.7 0.8 --seeds 0 1 2 3 4
    python benchmarks/fair_grid.py --datasets tuxpaint openclipart --recipes holdout asl-infonce \\
        --noise 0.2 0.4 0.7 0.8
    python benchmarks/high_noise_table.py
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from fair_grid import chosen_configs, load

BASELINE, ORACLE = "vse2-infonce", "vse2-oracle-infonce"


def mean_rsum(runs: list[dict]) -> float | None:
    return statistics.mean(r["test"]["rsum"] for r in runs) if runs else None


def cell(runs: list[dict], low: float | None, high: float | None) -> str:
    """``mean ± std (gap closed)`` of the test rSum of ``runs``; blank when none."""
    if not runs:
        return "not run"
    values = [r["test"]["rsum"] for r in runs]
    text = f"{statistics.mean(values):.1f}" + (
        f" ± {statistics.stdev(values):.1f}" if len(values) > 1 else ""
    )
    if low is not None and high is not None and high != low:
        text += f" ({(statistics.mean(values) - low) / (high - low):.0%})"
    return text + ("" if len(values) >= 5 else f" [n={len(values)}]")


def kept(runs: list[dict]) -> str:
    """Mean kept precision / recall of the runs' last division (model 0 for co-training)."""
    found = [r["detection"] for r in runs if r.get("detection")]
    if not found:
        return ""
    means = []
    for name in ("precision", "recall"):
        values = [v for d in found for k, v in d.items() if k.endswith(f"/{name}")]
        means.append(f"{statistics.mean(values):.2f}" if values else "–")
    return " / ".join(means)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="+", default=["tuxpaint", "openclipart"])
    parser.add_argument("--noise", nargs="+", type=float, default=[0.2, 0.4, 0.7, 0.8])
    parser.add_argument("--recipes", nargs="+", default=["asl-infonce", "holdout"])
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--select-seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--report-seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--fair", type=Path, default=Path("benchmarks/results/fair"))
    parser.add_argument("--bounds", type=Path, default=Path("benchmarks/results/pretrained"))
    parser.add_argument(
        "--fixed",
        nargs="*",
        default=[],
        help="variants run at one fixed configuration (no grid), read from --fixed-results",
    )
    parser.add_argument("--fixed-results", type=Path, default=Path("benchmarks/results/issue37"))
    args = parser.parse_args()
    grid_args = argparse.Namespace(
        datasets=args.datasets,
        noise=args.noise,
        recipes=args.recipes,
        budget=args.budget,
        select_seeds=args.select_seeds,
        results=args.fair,
        set=[],
    )
    chosen = chosen_configs(grid_args)
    columns = [*args.recipes, *args.fixed]
    head = " | ".join(f"{r} (gap closed) | {r} kept precision / recall" for r in columns)
    print(f"| dataset | noise | {BASELINE} (baseline) | {head} | {ORACLE} (oracle) |")
    print("|---|---|---|" + "---|---|" * len(columns) + "---|")
    for dataset in args.datasets:
        for noise in args.noise:
            low_runs = load(args.bounds, dataset, BASELINE, noise, args.report_seeds, [])
            high_runs = load(args.bounds, dataset, ORACLE, noise, args.report_seeds, [])
            low, high = mean_rsum(low_runs), mean_rsum(high_runs)
            cells = []
            for recipe in args.recipes:
                config = chosen[(dataset, noise, recipe)]
                runs = (
                    []
                    if config is None
                    else load(args.fair, dataset, recipe, noise, args.report_seeds, config)
                )
                cells += [cell(runs, low, high), kept(runs)]
            for variant in args.fixed:
                runs = load(args.fixed_results, dataset, variant, noise, args.report_seeds, [])
                cells += [cell(runs, low, high), kept(runs)]
            print(
                f"| {dataset} | {noise:g} | {cell(low_runs, None, None)} | {' | '.join(cells)} "
                f"| {cell(high_runs, None, None)} |"
            )


if __name__ == "__main__":
    main()

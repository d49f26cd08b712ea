"""Recipes compared at an equal tuning budget, each configuration chosen on dev (issue 36).

Every recipe gets a grid of the same size ``--budget`` G over its own main options (:data:`GRIDS`,
the first G of the product of its axes). Each configuration is run at the selection seeds; per
(dataset, noise, recipe) the configuration with the highest mean **dev** rSum (the best epoch's,
the checkpoint the test evaluates) is chosen, ties going to the earlier one in the grid; the
chosen one is run at the report seeds, and the table prints its TEST metrics only (mean ± std
over the report seeds), with a paired comparison against ``--reference``: the mean and std over
the common seeds of the difference of test rSum (recipe − reference), and two two-sided paired
tests of it, Student's paired t-test (``scipy.stats.ttest_rel``) and the Wilcoxon signed-rank
test (``scipy.stats.wilcoxon``, exact; with 5 seeds its smallest p is 0.0625).

Every run is a :func:`compare_recipes.run_one` and keeps its JSON in ``--results`` under
:func:`compare_recipes.run_key` (the grid's overrides are the key's suffix): a grid resumes,
several processes share it (``--shard``; a worker reports the recipes whose selection is complete,
so run it again, or with ``--table-only``, once every worker is done), and the selection seeds'
runs count for the report.

Example (the issue-36 comparison)::

    python benchmarks/fair_grid.py --datasets tuxpaint openclipart --noise 0.4 0.7
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path

from scipy import stats

from compare_recipes import VARIANTS, _claim, run_key, run_one

GRIDS: dict[str, dict[str, tuple]] = {
    # the plain model with holdout's loss: its only option is the temperature
    "vse-infonce": {"method.tau": (0.2, 0.1, 0.05, 0.3)},
    # holdout: InfoNCE's temperature × the weight of the suspected pairs' complementary loss
    "holdout": {"method.tau": (0.2, 0.1), "method.suspect_weight": (0.1, 0.3)},
    # NCR: the co-divide's clean threshold (NCR, PC²: 0.5)
    "ncr-infonce": {"method.tau": (0.2, 0.1), "method.p_threshold": (0.5, 0.7)},
    # ASL's hyperparameter analysis: the relaxation z of the soft boundary (λ is the asymmetric loss's)
    "asl-infonce": {"method.tau": (0.2, 0.1), "method.z": (3.0, 5.0)},
    "asl": {"method.z": (3.0, 5.0), "method.scale": (64, 32)},
    # PC² Table 4: the number K of pseudo-classes (the Tux Paint config: 32)
    "pc2-infonce": {"method.tau": (0.2, 0.1), "method.n_classes": (32, 16)},
    # L2RM Fig. 4: the transported mass ρ
    "l2rm-infonce-loss": {"method.loss_tau": (0.2, 0.1), "method.rho": (0.1, 0.05)},
    # RCL's own loss is already a softmax over the batch (Eq. 1–2), so no InfoNCE variant: its
    # temperature (the paper's 0.05, and InfoNCE's 0.2) × its complementary loss (Table 6: log, GCE)
    "rcl": {"method.tau": (0.05, 0.2), "method.loss": ("log", "gce")},
}
DEFAULT_RECIPES = [
    "vse-infonce",
    "holdout",
    "ncr-infonce",
    "asl-infonce",
    "pc2-infonce",
    "l2rm-infonce-loss",
    "rcl",
]


def grid(recipe: str, budget: int) -> list[list[str]]:
    """The first ``budget`` configurations of ``recipe``'s grid, each a list of overrides."""
    axes = GRIDS[recipe]
    product = [
        [f"{key}={value}" for key, value in zip(axes, values)] for values in itertools.product(*axes.values())
    ]
    if len(product) < budget:
        raise SystemExit(f"{recipe}: a grid of {len(product)} configurations, fewer than --budget {budget}")
    return product[:budget]


def load(results: Path, dataset: str, recipe: str, noise: float, seeds: list[int], extra: list[str]) -> list:
    """The results of a configuration at ``seeds`` that exist, in seed order."""
    paths = (results / f"{run_key(dataset, recipe, noise, s, extra)}.json" for s in seeds)
    return [json.loads(p.read_text()) for p in paths if p.is_file()]


def select(configs: list[list[str]], runs: list[list[dict]], n_seeds: int) -> int | None:
    """The index of the configuration with the highest mean dev rSum over its ``n_seeds`` runs
    (the first on a tie), or None while any configuration has fewer runs."""
    if any(len(r) < n_seeds for r in runs):
        return None
    scores = [statistics.mean(x["dev"]["rsum"] for x in r) for r in runs]
    return max(range(len(configs)), key=lambda i: (scores[i], -i))


def paired(runs: list[dict], reference: list[dict]) -> dict | None:
    """Test rSum of ``runs`` minus ``reference`` over their common seeds: ``n``, ``mean``,
    ``std``, and the two-sided p of the paired t-test and of the Wilcoxon signed-rank test
    (None below two common seeds)."""
    ours = {r["seed"]: r["test"]["rsum"] for r in runs}
    theirs = {r["seed"]: r["test"]["rsum"] for r in reference}
    seeds = sorted(ours.keys() & theirs.keys())
    if len(seeds) < 2:
        return None
    a, b = [ours[s] for s in seeds], [theirs[s] for s in seeds]
    diff = [x - y for x, y in zip(a, b)]
    same = all(d == 0 for d in diff)
    return {
        "n": len(seeds),
        "mean": statistics.mean(diff),
        "std": statistics.stdev(diff),
        "p_t": 1.0 if same else float(stats.ttest_rel(a, b).pvalue),
        "p_wilcoxon": 1.0 if same else float(stats.wilcoxon(a, b).pvalue),
    }


def _mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def _paired_text(p: dict | None) -> str:
    if p is None:
        return "| | | "
    return f"| {p['mean']:+.1f} ± {p['std']:.1f} (n={p['n']}) | {_p(p['p_t'])} | {_p(p['p_wilcoxon'])} "


def _p(value: float) -> str:
    return "< 0.001" if value < 0.0005 else f"{value:.3f}"


def _detection_text(runs: list[dict]) -> str:
    """The last division's AUC and its kept pairs' precision and recall (the clean split at the
    division's threshold against the truth), means over ``runs``; blank for a recipe without one."""
    found = [r["detection"] for r in runs if r.get("detection")]
    if not found:
        return "| | | "
    cells = []
    for name in ("auc", "precision", "recall"):
        values = [v for d in found for k, v in d.items() if k.endswith(f"/{name}")]
        cells.append(f"{statistics.mean(values):.3f}" if values else "")
    return "| " + " | ".join(cells) + " "


def chosen_configs(args: argparse.Namespace) -> dict[tuple, list[str] | None]:
    """``(dataset, noise, recipe)`` → the configuration chosen on dev (None while incomplete)."""
    chosen = {}
    for d, n, recipe in itertools.product(args.datasets, args.noise, args.recipes):
        configs = grid(recipe, args.budget)
        runs = [load(args.results, d, recipe, n, args.select_seeds, [*c, *args.set]) for c in configs]
        best = select(configs, runs, len(args.select_seeds))
        chosen[(d, n, recipe)] = None if best is None else configs[best]
    return chosen


def print_report(args: argparse.Namespace, chosen: dict[tuple, list[str] | None]) -> None:
    print(f"Equal budget: G = {args.budget} configurations per recipe (the first G of each grid):")
    for recipe in args.recipes:
        axes = " × ".join(f"{k} {{{', '.join(map(str, v))}}}" for k, v in GRIDS[recipe].items())
        print(f"- {recipe} ({' '.join(VARIANTS[recipe][1]) or 'its config'}): {axes}")
    print(
        f"Selection: the highest mean dev rSum (best epoch) over seeds {args.select_seeds}; test numbers "
        f"of the chosen configuration over seeds {args.report_seeds}. Paired: test rSum − "
        f"{args.reference}'s over the same seeds, mean ± std; p of the two-sided paired t-test "
        "(scipy.stats.ttest_rel) and of the Wilcoxon signed-rank test (scipy.stats.wilcoxon, exact). "
        "AUC: the last division's detection AUC (model 0 for co-training); kept precision / recall: "
        "the share of the pairs it keeps (clean probability above its threshold) that are truly "
        "matched, and the share of the truly matched pairs it keeps."
    )
    print(
        f"| dataset | noise | recipe | chosen (dev rSum) | seeds | test rSum | i2t R@1 | t2i R@1 "
        f"| Δ rSum vs {args.reference} | p (paired t) | p (Wilcoxon) | AUC | kept precision | kept recall |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (d, n, recipe), config in chosen.items():
        if config is None:
            print(f"| {d} | {n:g} | {recipe} | (selection runs missing) | | | | | | | | | | |")
            continue
        extra = [*config, *args.set]
        runs = load(args.results, d, recipe, n, args.report_seeds, extra)
        dev = statistics.mean(
            r["dev"]["rsum"] for r in load(args.results, d, recipe, n, args.select_seeds, extra)
        )
        ref_config = chosen.get((d, n, args.reference))
        reference = None
        if recipe != args.reference and ref_config is not None:
            ref_runs = load(args.results, d, args.reference, n, args.report_seeds, [*ref_config, *args.set])
            reference = paired(runs, ref_runs)
        print(
            f"| {d} | {n:g} | {recipe} | {' '.join(config)} ({dev:.1f}) | {len(runs)} "
            f"| {_mean_std([r['test']['rsum'] for r in runs])} "
            f"| {_mean_std([r['test']['i2t_r1'] for r in runs])} "
            f"| {_mean_std([r['test']['t2i_r1'] for r in runs])} {_paired_text(reference)}"
            f"{_detection_text(runs)}|"
        )


def run_jobs(jobs: list[tuple], args: argparse.Namespace) -> None:
    index, count = (int(x) for x in args.shard.split("/"))
    for d, recipe, n, s, extra in jobs[index::count]:
        path = args.results / f"{run_key(d, recipe, n, s, extra)}.json"
        if args.table_only or path.is_file() or not _claim(path):
            continue
        try:
            result = run_one(d, recipe, n, s, extra, args.runs)
            path.write_text(json.dumps(result, indent=1) + "\n")
        finally:
            path.with_suffix(".running").unlink(missing_ok=True)
        print(f"{path.stem}: dev {result['dev']['rsum']:.1f} test {result['test']['rsum']:.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="+", default=["tuxpaint"])
    parser.add_argument("--recipes", nargs="+", default=DEFAULT_RECIPES, choices=list(GRIDS))
    parser.add_argument("--noise", nargs="+", type=float, default=[0.4, 0.7])
    parser.add_argument("--budget", type=int, default=4, help="G: configurations per recipe")
    parser.add_argument("--select-seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--report-seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--reference", default="holdout", help="the recipe of the paired comparison")
    parser.add_argument("--set", nargs="*", default=[], help="extra key=value overrides for every run")
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/fair"))
    parser.add_argument("--runs", type=Path, default=Path("runs/fair"))
    parser.add_argument("--shard", default="0/1", help="i/n: run every n-th job starting at i")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    if args.reference not in args.recipes:
        parser.error(f"--reference {args.reference} is not one of --recipes")
    args.results.mkdir(parents=True, exist_ok=True)
    selection = [
        (d, recipe, n, s, [*config, *args.set])
        for d, n, recipe in itertools.product(args.datasets, args.noise, args.recipes)
        for config in grid(recipe, args.budget)
        for s in args.select_seeds
    ]
    run_jobs(selection, args)
    chosen = chosen_configs(args)
    report = [
        (d, recipe, n, s, [*config, *args.set])
        for (d, n, recipe), config in chosen.items()
        if config is not None
        for s in args.report_seeds
    ]
    run_jobs(report, args)
    print_report(args, chosen)


if __name__ == "__main__":
    main()

"""The documentation's figures, drawn from committed result files only (nothing is trained).

- ``gap_closed.png``: each recipe's share of the gap between the two-model InfoNCE baseline and
  oracle (``vse2-infonce``, ``vse2-oracle-infonce``: :mod:`high_noise_table`'s bounds), per
  dataset and noise rate, each recipe at its configuration chosen on dev by :mod:`fair_grid`
  (``benchmarks/results/fair/``, the bounds ``benchmarks/results/pretrained/``); the error bar is
  the standard deviation over the 5 seeds of the recipe's paired difference from the baseline, in
  the same units.
- ``detection_roc.png`` and ``calibration.png``: the audit's held-out ranking (ROC per seed) and
  its calibrated mismatch probabilities (a reliability diagram, the seeds pooled), from the
  scores :mod:`audit_calibration` saved (``benchmarks/results/calibration/scores/``) against
  their truth; the probabilities are :func:`mispair.division.calibration.calibrate`'s, what the
  audit reports.

Example (every figure under ``docs/images/``)::

    python benchmarks/plots.py
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from fair_grid import chosen_configs, load
from high_noise_table import BASELINE, ORACLE, mean_rsum

matplotlib.use("Agg")  # files only, no display: before any figure is made

HERE = Path(__file__).parent
RECIPES = ["vse-infonce", "rcl", "l2rm-infonce-loss", "pc2-infonce", "ncr-infonce", "asl-infonce", "holdout"]
NOISE = [0.2, 0.4, 0.7, 0.8]
DATASETS = {"tuxpaint": "Tux Paint", "openclipart": "OpenClipart"}
COLLECTIONS = {  # the audit's calibration collections shown, the failing ones among them
    "tuxpaint_r0.4": "Tux Paint, 40%",
    "openclipart_r0.4": "OpenClipart, 40%",
    "icons_r0.25": "Adwaita icons, 25%",
    "icons_symbolic_r0.25": "symbolic icons, 25%",
    "tuxpaint_near_r0.4": "Tux Paint, 40% near misses",
}
PNG = {"dpi": 90, "metadata": {"Software": None}}  # no version stamp: the same results, the same bytes


def gap_closed(value: float, baseline: float, oracle: float) -> float:
    """``(value − baseline) / (oracle − baseline)``: 0 at the baseline, 1 at the oracle."""
    return (value - baseline) / (oracle - baseline)


def gap_table(
    fair: Path, bounds: Path, datasets: list[str], noise: list[float], recipes: list[str]
) -> dict[tuple[str, float, str], tuple[float, float]]:
    """``(dataset, noise, recipe)`` → (gap closed by the mean test rSum, the standard deviation
    over the seeds of its paired difference from the baseline, in gap units: seed s of both trains
    on the same swaps), for every recipe whose dev selection and report seeds (0–4) are complete
    and whose bounds were run."""
    seeds = [0, 1, 2, 3, 4]
    grid = argparse.Namespace(
        datasets=datasets, noise=noise, recipes=recipes, budget=4, select_seeds=[0, 1], results=fair, set=[]
    )
    table = {}
    for (dataset, rate, recipe), config in chosen_configs(grid).items():
        baseline = load(bounds, dataset, BASELINE, rate, seeds, [])
        oracle = load(bounds, dataset, ORACLE, rate, seeds, [])
        runs = [] if config is None else load(fair, dataset, recipe, rate, seeds, config)
        if not (len(baseline) == len(oracle) == len(runs) == len(seeds)):
            continue
        low, high = mean_rsum(baseline), mean_rsum(oracle)
        paired = [r["test"]["rsum"] - b["test"]["rsum"] for r, b in zip(runs, baseline)]
        table[(dataset, rate, recipe)] = (
            gap_closed(mean_rsum(runs), low, high),
            statistics.stdev(paired) / (high - low),
        )
    return table


def plot_gap(table: dict[tuple[str, float, str], tuple[float, float]], out: Path) -> None:
    fig, axes = plt.subplots(1, len(DATASETS), figsize=(10, 3.6), sharey=True)
    width = 0.8 / len(RECIPES)
    colours = plt.get_cmap("tab10").colors
    for ax, (dataset, title) in zip(axes, DATASETS.items()):
        for i, recipe in enumerate(RECIPES):
            found = [
                (k, *table[(dataset, n, recipe)])
                for k, n in enumerate(NOISE)
                if (dataset, n, recipe) in table
            ]
            if not found:
                continue
            x, gap, spread = (np.array(column) for column in zip(*found))
            ax.bar(
                x + (i - (len(RECIPES) - 1) / 2) * width,
                100 * gap,
                width,
                yerr=100 * spread,
                color=colours[i],
                label=recipe,
                error_kw={"lw": 0.6, "capsize": 1.5, "ecolor": "0.3"},
            )
        ax.axhline(0, color="black", lw=0.8)
        ax.axhline(100, color="black", lw=0.8, ls="--")
        ax.set_xticks(range(len(NOISE)), [f"{n:.0%}" for n in NOISE])
        ax.set_xlabel("training pairs swapped (pmp)")
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", lw=0.3)
    axes[0].set_ylabel("gap closed (%)")
    fig.suptitle(
        f"Test rSum as a share of the gap from {BASELINE} (0%) to {ORACLE} (100%), 5 seeds", fontsize=10
    )
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize=8, loc="lower center", ncol=len(RECIPES))
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(out, **PNG)
    plt.close(fig)


def collection_scores(scores: Path, name: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per seed of the collection ``name``: (score, mismatch probability, truth) of every pair,
    the training pairs and the others together, as :mod:`audit_calibration`'s table reads them."""
    from mispair.division.calibration import Stratum, calibrate

    found = []
    for path in sorted(scores.glob(f"{name}_s*.npz")):
        saved = np.load(path)
        strata = [Stratum(saved["score"], saved["null"]), Stratum(saved["others"], saved["null_others"])]
        score = np.concatenate([saved["score"], saved["others"]])
        truth = np.concatenate([saved["truth"], saved["truth_others"]])
        found.append((score, calibrate(strata).mismatch_probability, truth))
    return found


def reliability(probability: np.ndarray, truth: np.ndarray, bins: int = 10) -> list[tuple[float, float, int]]:
    """Per non-empty bin of ``probability`` (``bins`` equal widths over [0, 1], the last closed):
    (the mean probability shown, the share truly mismatched, the number of pairs)."""
    index = np.clip((probability * bins).astype(int), 0, bins - 1)
    return [
        (float(probability[index == b].mean()), float(truth[index == b].mean()), int((index == b).sum()))
        for b in range(bins)
        if (index == b).any()
    ]


def plot_audit(scores: Path, roc_out: Path, calibration_out: Path, least: int = 10) -> None:
    from sklearn.metrics import roc_auc_score, roc_curve

    colours = plt.get_cmap("tab10").colors
    roc, ax_roc = plt.subplots(figsize=(4.6, 4.2))
    cal, ax_cal = plt.subplots(figsize=(4.6, 4.2))
    for colour, (name, label) in zip(colours, COLLECTIONS.items()):
        runs = collection_scores(scores, name)
        auc = np.mean([roc_auc_score(truth, -score) for score, _, truth in runs])
        for k, (score, _, truth) in enumerate(runs):
            fpr, tpr, _ = roc_curve(truth, -score)  # a lower score: more likely mismatched
            ax_roc.plot(
                fpr, tpr, color=colour, lw=1, alpha=0.8, label=None if k else f"{label} (AUC {auc:.2f})"
            )
        p = np.concatenate([r[1] for r in runs])
        truth = np.concatenate([r[2] for r in runs])
        points = [b for b in reliability(p, truth) if b[2] >= least]
        x, y, _ = (np.array(column) for column in zip(*points))
        ax_cal.plot(x, y, color=colour, lw=1, marker="o", ms=3, label=label)
    ax_roc.plot([0, 1], [0, 1], color="0.5", lw=0.8, ls=":")
    ax_roc.set_xlabel("matched pairs suspected (false-positive rate)")
    ax_roc.set_ylabel("mismatched pairs found (true-positive rate)")
    ax_roc.set_title("Held-out ranking, one curve per seed", fontsize=10)
    ax_roc.legend(fontsize=7, loc="lower right")
    ax_cal.plot([0, 1], [0, 1], color="black", lw=0.8, ls="--", label="perfect calibration")
    ax_cal.set_xlabel("mean mismatch probability shown (bin of 0.1)")
    ax_cal.set_ylabel("share truly mismatched")
    ax_cal.set_title(f"Calibration, 3 seeds pooled (bins of ≥ {least} pairs)", fontsize=10)
    ax_cal.legend(fontsize=7, loc="upper left")
    for fig, ax, out in ((roc, ax_roc, roc_out), (cal, ax_cal, calibration_out)):
        ax.set_xlim(0, 1), ax.set_ylim(0, 1.02), ax.set_aspect("equal"), ax.grid(lw=0.3)
        fig.tight_layout()
        fig.savefig(out, **PNG)
        plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fair", type=Path, default=HERE / "results" / "fair")
    parser.add_argument("--bounds", type=Path, default=HERE / "results" / "pretrained")
    parser.add_argument("--scores", type=Path, default=HERE / "results" / "calibration" / "scores")
    parser.add_argument("--out", type=Path, default=HERE.parent / "docs" / "images")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    table = gap_table(args.fair, args.bounds, list(DATASETS), NOISE, RECIPES)
    plot_gap(table, args.out / "gap_closed.png")
    plot_audit(args.scores, args.out / "detection_roc.png", args.out / "calibration.png")
    for name in ("gap_closed.png", "detection_roc.png", "calibration.png"):
        path = args.out / name
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()

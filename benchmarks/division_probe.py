"""The held-out division round by round, for one dataset, noise rate and set of overrides: each
round's detection AUC and kept precision / recall (clean probability above
``division.p_threshold``), the precision the last round's ranking reaches at a given recall, and
the same for the clean-trained reference (scorers trained on the truly matched pairs) with
``--reference``. It trains the scorers only (no final run), so a setting takes seconds on Tux Paint.

    python benchmarks/division_probe.py --dataset tuxpaint --noise 0.7 --seeds 0 1 2 \\
        --reference --set division.epochs=3

Issue 37 used it to ask how far the detection, and the precision of what a user keeps, can go at
high noise (docs/results.md, "High noise").
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from held_out_detection import planted_run
from mispair.division.scores import mixture_clean_probability
from mispair.engine.held_out import HeldOutScoring, RoundStart, out_of_fold_scores

RECALLS = (0.5, 0.7, 0.9)


@dataclass(frozen=True)
class RoundQuality:
    """One division's detection: AUC, and the kept pairs' precision and recall."""

    auc: float
    kept_precision: float
    kept_recall: float


def round_quality(score: np.ndarray, clean: np.ndarray, p_threshold: float) -> RoundQuality:
    """The quality of a division that keeps the pairs whose mixture clean probability
    (:func:`mixture_clean_probability`) of ``score`` is above ``p_threshold``."""
    kept = mixture_clean_probability(score) > p_threshold
    precision = float(clean[kept].mean()) if kept.any() else float("nan")
    return RoundQuality(float(roc_auc_score(clean, score)), precision, float(kept[clean].mean()))


def precision_at_recall(score: np.ndarray, clean: np.ndarray, recall: float) -> float:
    """The precision of the highest-scored pairs, as few as reach ``recall`` of the clean ones."""
    order = np.argsort(-score, kind="stable")
    found = np.cumsum(clean[order])
    enough = int(np.searchsorted(found, recall * clean.sum() - 1e-9)) + 1
    return float(found[enough - 1] / enough)


def probe(dataset: str, noise: float, seed: int, overrides: list[str], reference: bool) -> dict[str, object]:
    """Each round's :class:`RoundQuality`, and the precision at :data:`RECALLS` of the last round
    (and of the reference)."""
    run = planted_run(dataset, noise, seed, overrides)
    data, train, clean = run.data, run.train, run.clean
    scoring, division = HeldOutScoring.of(run.config), run.config.division

    def scores(trusted: np.ndarray | None) -> np.ndarray:
        return out_of_fold_scores(scoring, data, train, round_start=RoundStart(trusted=trusted)).score

    found: dict[str, object] = {}
    trusted = None
    for round_index in range(division.rounds):
        score = scores(trusted)
        found[f"round {round_index + 1}"] = round_quality(score, clean, division.p_threshold)
        trusted = mixture_clean_probability(score) > division.p_threshold
    found["precision at recall"] = [precision_at_recall(score, clean, r) for r in RECALLS]
    if reference:
        score = scores(clean)
        found["reference"] = round_quality(score, clean, division.p_threshold)
        found["reference precision at recall"] = [precision_at_recall(score, clean, r) for r in RECALLS]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="tuxpaint")
    parser.add_argument("--noise", type=float, default=0.7)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--set", nargs="*", default=[], help="key=value overrides of the holdout config")
    parser.add_argument("--reference", action="store_true", help="the clean-trained reference too")
    args = parser.parse_args()
    torch.set_num_threads(1)
    runs = [probe(args.dataset, args.noise, s, args.set, args.reference) for s in args.seeds]
    mean = statistics.mean
    seeds, overrides = " ".join(map(str, args.seeds)), " ".join(args.set) or "the config"
    print(f"{args.dataset}, pmp {args.noise:g}, seeds {seeds}, {overrides}")
    print("| division | AUC | kept precision / recall |\n|---|---|---|")
    for key, first in runs[0].items():
        if isinstance(first, RoundQuality):
            got = [r[key] for r in runs]
            print(
                f"| {key} | {mean(g.auc for g in got):.3f} | "
                f"{mean(g.kept_precision for g in got):.2f} / {mean(g.kept_recall for g in got):.2f} |"
            )
    for key in ("precision at recall", "reference precision at recall"):
        if key in runs[0]:
            values = np.mean([r[key] for r in runs], axis=0)
            print(f"{key} {', '.join(f'{r:g}: {v:.2f}' for r, v in zip(RECALLS, values))}")


if __name__ == "__main__":
    main()

"""Detection AUC of the division's pair scores: in-sample against held-out, and the clean-trained reference.

For one dataset and noise rate, with the scorer of ``configs/holdout/<dataset>.yaml`` (its
division section): the AUC, against the true mismatch flags, of

- ``early``: one scorer on all pairs, each pair's similarity averaged over its first epochs;
- ``out_of_fold``: ``similarity`` and ``contrast`` scores after 1 and 2 rounds, and the
  ``contrast`` scores averaged over the config's ``division.repeats`` partitions, each round;
- ``clean reference``: out-of-fold scorers trained on the truly clean pairs only (contrast score; one
  partition and the config's repeats);
- ``in-sample, last``: the similarity of every pair under a scorer trained on all of them.

    python benchmarks/held_out_detection.py --dataset tuxpaint --noise 0.4 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from mispair.config import RunConfig, load_config
from mispair.data.batching import TrainingPairs
from mispair.division.scores import clean_split
from mispair.encoding import pair_similarities
from mispair.engine.assembly import RunData, load_run_data, prepare_text_encoder
from mispair.engine.held_out import (
    HeldOutPlan,
    HeldOutScoring,
    RoundStart,
    early_epoch_scores,
    out_of_fold_scores,
    train_scorer,
)


@dataclass(frozen=True)
class PlantedRun:
    """``configs/holdout/<dataset>.yaml`` with noise planted: its config, data, training pairs as
    paired, and which of them are truly matched (``clean [n_pairs]``)."""

    config: RunConfig
    data: RunData
    train: TrainingPairs
    clean: np.ndarray


def planted_run(dataset: str, noise: float, seed: int, overrides: Sequence[str] = ()) -> PlantedRun:
    """The holdout config of ``dataset`` at pmp ``noise`` (noise and training seed ``seed``, then
    ``overrides``), its data read and its text encoder ready."""
    config = load_config(
        f"configs/holdout/{dataset}.yaml",
        [f"data.noise.rate={noise}", f"data.noise.seed={seed}", f"train.seed={seed}", *overrides],
    )
    data = load_run_data(config)
    prepare_text_encoder(config.model, config.data, data.train_tokens, log=lambda m: None)
    train = TrainingPairs(data.train, data.train_tokens, data.noise.image_of_caption)
    return PlantedRun(config, data, train, ~data.noise.is_noisy)


def aucs(dataset: str, noise: float, seed: int) -> dict[str, float]:
    run = planted_run(dataset, noise, seed)
    config, data, train, clean = run.config, run.data, run.train, run.clean
    scorer, folds = HeldOutScoring.of(config).scorer, config.division.folds

    def oof(kind: str, trusted=None, repeats: int = 1) -> np.ndarray:
        plan = HeldOutPlan(folds, repeats=repeats, score_kind=kind, scorer_pairs=config.division.scorer_pairs)
        scoring = HeldOutScoring(scorer, plan)
        return out_of_fold_scores(scoring, data, train, round_start=RoundStart(trusted=trusted)).score

    found = {}
    for epochs in (1, 2, 3):
        trained = replace(scorer, train=replace(scorer.train, epochs=epochs))
        early = early_epoch_scores(HeldOutScoring(trained), data, train).score
        found[f"early, {epochs} epoch(s)"] = roc_auc_score(clean, early)
    for kind in ("similarity", "contrast"):
        first = oof(kind)
        found[f"out of fold, {kind}, round 1"] = roc_auc_score(clean, first)
        found[f"out of fold, {kind}, round 2"] = roc_auc_score(clean, oof(kind, clean_split(first)))
    repeats, trusted = config.division.repeats, None
    for round_index in range(1, config.division.rounds + 1):
        score = oof("contrast", trusted, repeats)
        found[f"out of fold, contrast, {repeats} repeats, round {round_index}"] = roc_auc_score(clean, score)
        trusted = clean_split(score)
    found["clean reference (contrast, truly clean scorers)"] = roc_auc_score(clean, oof("contrast", clean))
    found[f"clean reference, {repeats} repeats"] = roc_auc_score(clean, oof("contrast", clean, repeats))
    model = train_scorer(scorer, data, train, torch.device("cpu"))
    found["in-sample, after the scorer's epochs"] = roc_auc_score(
        clean, pair_similarities([model], train, 256, torch.device("cpu"))
    )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="tuxpaint")
    parser.add_argument("--noise", type=float, default=0.4)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    args = parser.parse_args()
    torch.set_num_threads(1)
    runs = [aucs(args.dataset, args.noise, s) for s in args.seeds]
    print(
        f"{args.dataset}, pmp {args.noise:g}, seeds {' '.join(map(str, args.seeds))}: "
        "detection AUC (mean, min–max)"
    )
    print("| scores | AUC | range |\n|---|---|---|")
    for key in runs[0]:
        values = [r[key] for r in runs]
        print(f"| {key} | {statistics.mean(values):.3f} | {min(values):.3f}–{max(values):.3f} |")


if __name__ == "__main__":
    main()

"""How well GMM, BMM and VBGMM find the mismatched pairs at the end of the warm-up.

For each noise rate and seed: warm up the ``ncr`` recipe's two models (its config's
``warmup_epochs``), score every training pair with NCR's per-sample loss, fit each mixture to each
model's losses and score the clean probabilities against the true noise (ROC-AUC, and
precision/recall/F1 of the clean split at 0.5). Prints mean ± std over seeds and models.

    python benchmarks/division_quality.py --dataset tuxpaint --noise 0.4 0.7 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from mispair.config import load_config
from mispair.data.batching import TrainingPairs, encode_captions
from mispair.division import detection_metrics, fit_bmm, fit_gmm, fit_vbgmm, min_max_normalize
from mispair.engine.assembly import load_run_data
from mispair.engine.run import train_run
from mispair.engine.trained import TrainedRun
from mispair.methods.scoring import per_sample_losses

MIXTURES = {"gmm": fit_gmm, "bmm": fit_bmm, "vbgmm": fit_vbgmm}


def warmed_up_scores(
    dataset: str, noise: float, seed: int, runs: Path, warmup: int | None
) -> dict[str, list[dict]]:
    config = load_config(
        f"configs/ncr/{dataset}.yaml",
        [f"data.noise.rate={noise}", f"data.noise.seed={seed}", f"train.seed={seed}"],
    )
    config.train.epochs = warmup or config.method.get("warmup_epochs", 1)
    config.output = str(runs / f"{dataset}_warmup{config.train.epochs}_n{noise:g}_s{seed}")
    train_run(config, progress=False, log=lambda m: None)
    data = load_run_data(config)
    models = TrainedRun.open(config.output_dir / "last.pt", "cpu").models
    paired = data.noise.image_of_caption
    train = TrainingPairs(data.train, encode_captions(data.train, data.vocab), paired)
    losses = per_sample_losses(models, train, batch_size=config.train.eval_batch_size, seed=seed)
    return {
        name: [
            detection_metrics(fit(min_max_normalize(row)).clean_prob, data.noise.is_noisy) for row in losses
        ]
        for name, fit in MIXTURES.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", default="tuxpaint")
    parser.add_argument("--noise", nargs="+", type=float, default=[0.4, 0.7])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--warmup", type=int, help="warm-up epochs (default: the config's)")
    parser.add_argument("--runs", type=Path, default=Path("runs/division"))
    args = parser.parse_args()
    print("| noise | mixture | AUC | precision | recall | F1 | clean fraction |")
    print("|---|---|---|---|---|---|---|")
    for noise in args.noise:
        scores: dict[str, list[dict]] = {name: [] for name in MIXTURES}
        for seed in args.seeds:
            found = warmed_up_scores(args.dataset, noise, seed, args.runs, args.warmup)
            for name, per_model in found.items():
                scores[name].extend(per_model)
        for name, rows in scores.items():
            cells = []
            for key in ("auc", "precision", "recall", "f1", "clean_fraction"):
                values = [r[key] for r in rows]
                cells.append(f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}")
            print(f"| {noise:g} | {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

"""Does a refinement round of the held-out scoring leak? Its scorers train on the pairs of the other
folds that the previous round trusted, and that trust was decided by scores of models which
trained on the fold now held out. A fold's pairs (mismatched ones too) then score above its decoys,
which no model's training set was chosen by, and the decoy-calibrated share reads low.

On a collection with ``rate`` of its captions swapped (written as a user's folder, as
``audit_calibration.py`` writes it), one repeat of the audit's held-out scoring, three ways:

- ``round 1``: scorers trained on every pair of the other folds (no trust, no leak);
- ``leaky 2``: a refinement round as the engine runs it (``division.rounds``): trust from round 1's
  scores of all pairs, each scorer trained on the trusted pairs of the other folds;
- ``nested 2``: the same round with its trust decided inside the other folds only: for each fold,
  a held-out scoring of the other folds alone (one fold fewer), its clean split the trust, so that
  nothing a fold's scorer trains on was chosen by a model that saw the fold.

Printed per row: the swapped pairs' share among the lowest 30% of the decoys (0.30 when they score
like decoys), the correct pairs' (0 when none scores as low), the ranking's AUC against the truth,
and the share the audit would read (``#{u ≤ 0.3} / (0.3 n)``).

    python benchmarks/refinement_leak.py --collections tuxpaint --rates 0.2 0.7 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import audit_calibration as calibration  # noqa: E402

WORK = Path("runs/refinement_leak")


def scorings(folder: Path):
    """``(data, train, scoring)``: the audit's data and training pairs of the folder, and its
    held-out scoring cut to one repeat and one round."""
    from mispair.audit.collection import audit_config
    from mispair.data.loading import concrete_source
    from mispair.engine.assembly import (
        concrete_precision,
        load_run_data,
        other_splits,
        prepare_text_encoder,
        training_pairs,
    )
    from mispair.engine.held_out import HeldOutScoring

    config = audit_config(folder, folder.parent / "audit")
    config = replace(config, data=concrete_source(config.data))
    data = load_run_data(config)
    train, _ = training_pairs(config, data)
    others = other_splits(config, data)
    config = replace(config, model=concrete_precision(config.model, config.data, lambda m: None))
    prepare_text_encoder(
        config.model, config.data, data.train_tokens + data.dev_tokens + others.tokens, log=print
    )
    base = HeldOutScoring.of(config)
    return data, train, replace(base, plan=replace(base.plan, repeats=1, rounds=1))


def three_ways(data, train, scoring) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{way: (scores [n], decoy scores [m])}`` for round 1, the leaky and the nested round 2."""
    from mispair.engine.held_out import RoundStart, out_of_fold_scores
    from mispair.engine.held_out.rounds import _clean

    folds = scoring.plan.folds
    first = out_of_fold_scores(scoring, data, train)
    fold = first.fold[0]
    trusted = _clean(first.score, scoring.plan)
    leaky = out_of_fold_scores(scoring, data, train, round_start=RoundStart(index=1, trusted=trusted))
    score, null = np.zeros(len(train), np.float32), np.zeros(len(first.decoys), np.float32)
    inner_scoring = replace(scoring, plan=replace(scoring.plan, folds=folds - 1))
    for k in range(folds):
        inner = np.flatnonzero(fold != k)
        trust = np.zeros(len(train), dtype=bool)
        trust[inner] = _clean(
            out_of_fold_scores(inner_scoring, data, train.subset(inner)).score, scoring.plan
        )
        scored = out_of_fold_scores(scoring, data, train, round_start=RoundStart(index=1, trusted=trust))
        score[fold == k] = scored.score[fold == k]
        mine = fold[first.decoys[:, 0]] == k
        null[mine] = scored.null[mine]
    return {
        "round 1": (first.score, first.null),
        "leaky 2": (leaky.score, leaky.null),
        "nested 2": (score, null),
    }


def line(name: str, way: str, truth: np.ndarray, score: np.ndarray, null: np.ndarray) -> str:
    from sklearn.metrics import roc_auc_score

    from mispair.division.calibration import null_quantiles

    u = null_quantiles(score, null)
    return (
        f"| {name} | {way} | {np.mean(u[truth] <= 0.3):.3f} | {np.mean(u[~truth] <= 0.3):.3f} | "
        f"{roc_auc_score(truth, -score):.3f} | {min(np.mean(u <= 0.3) / 0.3, 1.0):.3f} | {truth.mean():.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collections", nargs="+", default=["tuxpaint"])
    parser.add_argument("--rates", nargs="+", type=float, default=[0.2, 0.7])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--openclipart-max", type=int, default=3000)
    args = parser.parse_args()
    print(
        "| collection | scoring | swapped pairs in the decoys' lowest 30% | correct pairs there | AUC "
        "| share read | true share |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.collections:
        pairs = calibration.collection_pairs(name, WORK / name, args)
        for rate in args.rates:
            for seed in args.seeds:
                folder = WORK / f"{name}_r{rate:g}_s{seed}" / "collection"
                truth_of_row = calibration.write_collection(folder, pairs, rate, seed)
                data, train, scoring = scorings(folder)
                truth = truth_of_row[np.array([int(i) for i in train.pairs.pair_ids])]
                for way, (score, null) in three_ways(data, train, scoring).items():
                    print(line(f"{name} {rate:g} s{seed}", way, truth, score, null), flush=True)


if __name__ == "__main__":
    main()

"""How far can a hundred answers prove a drop? The proven drop (:func:`mispair.estimate.selection.
proven_cut`) stays inside the sample's ``cut`` stratum; here that stratum is the audit's suspects
at its own estimated false-discovery rate of 0.1 (the default), 0.2 or 0.3, and the cut holds at
least 50 (the default) or 65 of the first answers (``design.CUT_CHECK``). For each, over the
committed scores of the calibration collections (``results/calibration/scores``) and honest
reviewers (answers from the truth) on the design's orders: the share of all mismatched pairs the
drop finds at ``--fdr 0.1`` after 100 answers, how often its realized false-discovery proportion
is at most 0.1, the share of its pairs nobody judged, and the planned look (the answers to ± 3
points). Beside them, the ceiling no proof can pass: the share of the mismatched pairs in the
largest top of the ranking whose true proportion of correct pairs is at most 0.1 (an oracle),
and the share inside the default stratum.

    python benchmarks/drop_stratum.py > benchmarks/results/drop_stratum.md
    python benchmarks/drop_stratum.py --reviewers 20      # a quick look
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from labelled_sample import SCORES, load

RATES = (0.1, 0.2, 0.3)
CHECKS = (50, 65)
FDR = 0.1
ANSWERS = 100
COLLECTIONS = ("tuxpaint_r0.2", "tuxpaint_r0.3", "tuxpaint_r0.4", "openclipart_r0.2", "openclipart_r0.4")


def oracle_recall(suspicion: np.ndarray, truth: np.ndarray, fdr: float) -> float:
    """The share of the mismatched pairs in the largest top of the ranking whose true share of
    correct pairs is at most ``fdr``."""
    y = truth[np.argsort(-suspicion, kind="stable")]
    fdp = np.cumsum(1 - y) / np.arange(1, len(y) + 1)
    passing = np.flatnonzero(fdp <= fdr)
    return float(y[: passing[-1] + 1].sum() / y.sum()) if len(passing) else 0.0


def variant(scored, suspected: np.ndarray, reviewers: int, seed: int) -> tuple[float, float, float, int]:
    """(found, FDP ≤ q, unjudged, planned look) of the drop over ``reviewers`` orders."""
    from mispair.estimate.sample import sample_order
    from mispair.estimate.selection import proven_cut
    from mispair.estimate.share import planned_look

    truth, big = scored.truth, len(scored.truth)
    found, held, unjudged, look = [], [], [], 0
    for r in range(reviewers):
        sample = sample_order([str(i) for i in range(big)], seed + r, scored.probability, suspected)
        at, strata = sample["pair_id"].astype(int).to_numpy(), sample["stratum"].to_numpy()
        look = planned_look(scored.probability[at], strata)
        in_cut = np.zeros(big, dtype=bool)
        in_cut[at[strata == "cut"]] = True
        answers = np.full(big, np.nan)
        answers[at[:ANSWERS]] = truth[at[:ANSWERS]]
        dropped = proven_cut(scored.suspicion, answers, in_cut, FDR).dropped
        fdp = float(1 - truth[dropped].mean()) if dropped.any() else 0.0
        found.append(truth[dropped].sum() / truth.sum())
        held.append(fdp <= FDR)
        unjudged.append((dropped & np.isnan(answers)).sum() / max(dropped.sum(), 1))
    return float(np.mean(found)), float(np.mean(held)), float(np.mean(unjudged)), look


def main(argv: list[str] | None = None) -> int:
    from mispair.division.calibration import Stratum, calibrate
    from mispair.estimate import design

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reviewers", type=int, default=100, help="sample orders per score file and variant")
    args = parser.parse_args(argv)
    print(f"# The proven drop's stratum ({args.reviewers} honest reviewers per score file and variant)\n")
    print("`python benchmarks/drop_stratum.py`: the drop at `--fdr 0.1` after 100 answers, per score file.")
    print("Each cell: found / FDP ≤ 0.1 / unjudged / planned look. Oracle: the ceiling of any proof;")
    print("suspects: the mismatched pairs inside the default stratum.\n")
    header = [f"rate {rate}, {check} answers" for rate in RATES for check in CHECKS]
    print("| score file | oracle | suspects | " + " | ".join(header) + " |")
    print("|---|---|---|" + "---|" * len(header))
    saved_check = design.CUT_CHECK
    for path in sorted(SCORES.glob("*.npz")):
        if path.stem.rsplit("_s", 1)[0] not in COLLECTIONS:
            continue
        scored = load(path)
        saved = np.load(path)
        found = calibrate(
            [Stratum(saved["score"], saved["null"]), Stratum(saved["others"], saved["null_others"])]
        )
        cells = []
        for rate in RATES:
            suspected = found.suspected(rate)
            for check in CHECKS:
                design.CUT_CHECK = check
                design._schedule.cache_clear()
                f, held, unjudged, look = variant(scored, suspected, args.reviewers, 1000)
                cells.append(f"{f:.2f} / {held:.2f} / {unjudged:.2f} / {look}")
        design.CUT_CHECK = saved_check
        design._schedule.cache_clear()
        inside = scored.truth[scored.suspected].sum() / scored.truth.sum()
        oracle = oracle_recall(scored.suspicion, scored.truth, FDR)
        print(f"| {path.stem} | {oracle:.2f} | {inside:.2f} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

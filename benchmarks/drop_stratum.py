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

A second table (``--ceiling``) asks what the proof itself allows: a cut stratum sized by an oracle
(the top ``K`` of the ranking that finds the most, ``K`` chosen on one set of reviewers and
measured on another), 50 answers drawn uniformly inside it and the other 50 outside (as the
design places them at 100 answers), or all 100 inside it, and the same fixed sequence of tests
(:func:`~mispair.estimate.selection.proven_cut`). No choice of the stratum finds more with these
answers; the default's figure beside it shows how far the design is from that ceiling.

    python benchmarks/drop_stratum.py > benchmarks/results/drop_stratum.md
    python benchmarks/drop_stratum.py --reviewers 20      # a quick look
    python benchmarks/drop_stratum.py --ceiling >> benchmarks/results/drop_stratum.md
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


def oracle_stratum_found(
    suspicion: np.ndarray, truth: np.ndarray, top: int, inside: int, reviewers: int, seed: int
) -> float:
    """The mean share of all mismatched pairs the proven drop finds at ``--fdr 0.1`` over
    ``reviewers`` honest reviewers when the cut stratum is the ``top`` pairs of the ranking by
    ``suspicion [N]``, ``inside`` of the 100 answers fall uniformly in it and the rest uniformly
    outside (``truth [N]``: 1 mismatched)."""
    from mispair.estimate.selection import proven_cut

    ranked = np.argsort(-suspicion, kind="stable")
    in_cut = np.zeros(len(truth), dtype=bool)
    in_cut[ranked[:top]] = True
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(reviewers):
        answers = np.full(len(truth), np.nan)
        judged = [rng.choice(ranked[:top], inside, replace=False)]
        if inside < ANSWERS:
            judged.append(rng.choice(ranked[top:], ANSWERS - inside, replace=False))
        judged_at = np.concatenate(judged)
        answers[judged_at] = truth[judged_at]
        dropped = proven_cut(suspicion, answers, in_cut, FDR).dropped
        found.append(truth[dropped].sum() / truth.sum())
    return float(np.mean(found))


def ceiling(scored, inside: int, reviewers: int) -> tuple[float, int]:
    """(found, top): the oracle-sized stratum's figure (module docstring): the top is chosen on
    ``reviewers // 4`` reviewers over a grid of sizes and measured on ``reviewers`` others."""
    big = len(scored.truth)
    step = max(5, big // 150)
    grid = range(inside + 10, big // 2, step)
    quick = [
        oracle_stratum_found(scored.suspicion, scored.truth, k, inside, max(reviewers // 4, 10), 7)
        for k in grid
    ]
    top = grid[int(np.argmax(quick))]
    return oracle_stratum_found(scored.suspicion, scored.truth, top, inside, reviewers, 2000), top


def model_sized_top(scored, inside: int, draws: int = 30) -> int:
    """The cut stratum's size a rule without the truth would choose: the top of the ranking whose
    drop finds the most when each pair is mismatched with its calibrated probability (``draws``
    collections drawn from the probabilities, one reviewer each)."""
    rng = np.random.default_rng(3)
    big = len(scored.truth)
    grid = range(inside + 10, big // 2, max(5, big // 100))

    def expected(top: int) -> float:
        drawn = [(rng.random(big) < scored.probability).astype(float) for _ in range(draws)]
        return float(
            np.mean(
                [oracle_stratum_found(scored.suspicion, t, top, inside, 1, k) for k, t in enumerate(drawn)]
            )
        )

    return grid[int(np.argmax([expected(top) for top in grid]))]


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
    parser.add_argument("--ceiling", action="store_true", help="the oracle-sized stratum's table instead")
    args = parser.parse_args(argv)
    if args.ceiling:
        return ceiling_table(args.reviewers)
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


def ceiling_table(reviewers: int) -> int:
    """The second table of the module docstring, one row per score file."""
    from sklearn.metrics import roc_auc_score

    print(f"\n## What 100 answers can prove at most ({reviewers} honest reviewers per cell)\n")
    print("`python benchmarks/drop_stratum.py --ceiling`: the share of all mismatched pairs the drop")
    print("finds at `--fdr 0.1` after 100 answers: with the design (the default stratum, the audit's")
    print("suspects), and with a cut stratum sized by an oracle (its size in pairs beside it) holding")
    print("50 or all 100 of the answers; and with 50 in a stratum sized by the probabilities (the top")
    print("whose drop would find the most were each pair mismatched with its calibrated probability).")
    print("AUC: the ranking's, against the truth.\n")
    print(
        "| score file | AUC | suspects | design | sized by probabilities, 50 in it "
        "| oracle, 50 in it | oracle, 100 in it |"
    )
    print("|---|---|---|---|---|---|---|")
    for path in sorted(SCORES.glob("*.npz")):
        if path.stem.rsplit("_s", 1)[0] not in COLLECTIONS:
            continue
        scored = load(path)
        auc = roc_auc_score(scored.truth, scored.suspicion)
        design_found = variant(scored, scored.suspected, reviewers, 1000)[0]
        cells = [
            f"{found:.2f} ({top})" for found, top in (ceiling(scored, n, reviewers) for n in (50, ANSWERS))
        ]
        suspects = int(scored.suspected.sum())
        top = model_sized_top(scored, 50)
        model = oracle_stratum_found(scored.suspicion, scored.truth, top, 50, reviewers, 2000)
        cells.insert(0, f"{model:.2f} ({top})")
        print(
            f"| {path.stem} | {auc:.3f} | {suspects} | {design_found:.2f} | " + " | ".join(cells) + " |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

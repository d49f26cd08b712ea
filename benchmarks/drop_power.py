"""How much the proven drop could find: on the committed calibration scores, the realized
false-discovery proportion of the top of the audit's ranking at 30, 40 and 50% of the mismatched
pairs found, beside the audit's suspects and theirs. A cut is provable at ``--fdr 0.1`` from ``m``
answers inside it only when about ``3/m`` or fewer of them are correct pairs (an exact
hypergeometric bound at 95%), so these proportions say where a proof from ~60 answers can reach.

    python benchmarks/drop_power.py > benchmarks/results/drop_power.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
RECALLS = (0.3, 0.4, 0.5)


def fdp_at_recall(order: np.ndarray, truth: np.ndarray, recall: float) -> float:
    """The share of correct pairs among the fewest top pairs of ``order`` holding ``recall`` of
    the mismatched ones."""
    found = np.cumsum(truth[order])
    k = int(np.searchsorted(found, recall * truth.sum())) + 1
    return float(1 - found[k - 1] / k)


def main() -> int:
    import labelled_sample

    print("# The room for a proven drop (`python benchmarks/drop_power.py`, seed 0 of each score file)\n")
    print(
        "| score file | pairs | mismatched | suspects (their FDP) | FDP at "
        + " / ".join(f"{r:.0%}" for r in RECALLS)
        + " recall |"
    )
    print("|---|---|---|---|---|")
    for path in sorted(labelled_sample.SCORES.glob("*_s0.npz")):
        scored = labelled_sample.load(path)
        truth = scored.truth
        if truth.sum() == 0:
            continue
        order = np.argsort(-scored.suspicion, kind="stable")
        suspects = int(scored.suspected.sum())
        own = f"{1 - truth[scored.suspected].mean():.3f}" if suspects else "–"
        at = " / ".join(f"{fdp_at_recall(order, truth, r):.3f}" for r in RECALLS)
        print(f"| {path.stem} | {len(truth):,} | {int(truth.sum())} | {suspects} ({own}) | {at} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

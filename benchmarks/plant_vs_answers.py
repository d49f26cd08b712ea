"""Which trust number to believe: the AUC ``--plant`` claims, the AUC the decoys claim, or the AUC
on a person's answers — each against the truth, on a collection whose errors the audit's swaps
do not resemble (the Tux Paint stamps with 40% of the captions moved within their category: near
misses, as :mod:`audit_calibration` writes ``tuxpaint_near``) and on one whose errors they do
(the same stamps with 40% swapped at random).

The collection is audited as a user would audit it with ``--plant 0.1`` (the audit's default
run; one audit each, a few minutes on 2 cores); an honest reviewer then answers the first
``--answers`` pairs of the audit's random sample from the truth (the moved captions and the
audit's own swaps), and :meth:`AuditResult.estimate` gives the AUC on those answers with its
interval.

    python benchmarks/plant_vs_answers.py > benchmarks/results/plant_vs_answers.md
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from audit_calibration import tuxpaint_pairs, write_collection

WORK = Path("runs/plant_vs_answers")


def measure(name: str, near: bool, answers: int, seed: int) -> dict[str, object]:
    import pandas as pd
    from sklearn.metrics import roc_auc_score

    from mispair.audit import audit_collection

    folder = WORK / name
    moved = write_collection(folder / "collection", tuxpaint_pairs(), 0.4, seed, near=near)
    result = audit_collection(
        folder / "collection", folder / "audit", plant=0.1, seed=seed, progress=False, log=lambda _: None
    )
    pairs = result.pairs
    planted = pairs["truly_mismatched"].fillna(0).astype(bool).to_numpy()
    rows = pairs["pair_id"].astype(int).to_numpy()  # a folder's pair ids: its rows
    truth = moved[rows] | planted
    p = pairs["mismatch_probability"].to_numpy()
    judged = result.sample["pair_id"].head(answers)
    truth_of = dict(zip(pairs["pair_id"].astype(str), truth))
    labels = pd.DataFrame(
        {"pair_id": judged, "label": ["mismatched" if truth_of[i] else "correct" for i in judged]}
    )
    found = result.estimate(labels)
    check, calibration = result.summary.self_check, result.summary.calibration
    return {
        "collection": name,
        "truly mismatched": f"{truth.mean():.3f}",
        "true AUC": f"{roc_auc_score(truth, p):.3f}",
        "--plant claims": f"{check.estimated_auc:.3f}" if check is not None else "–",
        "the decoys claim": f"{calibration.separation_auc:.3f}"
        if calibration and calibration.separation_auc
        else "–",
        f"AUC on {answers} answers": f"{found.auc.value:.3f} ({found.auc.low:.2f}–{found.auc.high:.2f})",
        "share, scores alone": f"{result.summary.estimated_mismatched_share:.3f}",
        f"share, {answers} answers": f"{found.share.estimate.share:.3f} ({found.share.estimate.low:.2f}–"
        f"{found.share.estimate.high:.2f})",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the collections and audits")
    args = parser.parse_args(argv)
    rows = [
        measure("tuxpaint_near", True, args.answers, args.seed),
        measure("tuxpaint", False, args.answers, args.seed),
    ]
    if not args.keep:
        shutil.rmtree(WORK, ignore_errors=True)
    print(f"# Which AUC to believe (`python benchmarks/plant_vs_answers.py`, seed {args.seed})\n")
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for row in rows:
        print("| " + " | ".join(str(v) for v in row.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

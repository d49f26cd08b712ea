"""An audit of ``embeddings_table.py``'s collection against its truth: ``judge.py AUDIT TRUTH.npy``
prints the share (estimated and true), the ranking's AUC, the suspects' realized false-discovery
rate, the expected calibration error and the mismatched share among the kept pairs."""

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score


def main(audit: Path, truth_file: Path) -> None:
    pairs = pd.read_csv(audit / "pairs.csv")
    summary = json.loads((audit / "summary.json").read_text())
    truth = np.load(truth_file)[pairs["pair_id"].astype(str).str.lstrip("p").astype(int).to_numpy()]
    probability = pairs["mismatch_probability"].to_numpy()
    suspected = pairs["suspected"].astype(bool).to_numpy()
    bins = np.clip((probability * 10).astype(int), 0, 9)
    ece = sum(
        abs(probability[bins == b].mean() - truth[bins == b].mean()) * (bins == b).sum() for b in set(bins)
    )
    calibration = summary["calibration"]
    realized = 1 - truth[suspected].mean() if suspected.any() else 0.0
    kept_estimate = calibration["estimated_kept_mismatched_share"]
    print(
        f"share {summary['estimated_mismatched_share']:.3f} {summary['estimated_mismatched_share_interval']} "
        f"(true {truth.mean():.3f}); AUC {roc_auc_score(truth, probability):.4f}; "
        f"suspected {suspected.mean():.3f}, realized FDR {realized:.3f} "
        f"(estimated {calibration['estimated_false_drop_share']:.3f}); ECE {ece / len(truth):.3f}; "
        f"kept mismatched {truth[~suspected].mean():.3f} (estimated {kept_estimate:.3f})"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))

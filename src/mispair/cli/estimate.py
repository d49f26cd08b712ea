"""``mispair estimate AUDIT --labels FILE``: what a person's answers on the audit's random sample
prove (:mod:`mispair.estimate`), printed and written into the audit's folder."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_parsers(sub: Any) -> None:
    """Add ``mispair estimate`` to the command line's verbs."""
    estimate = sub.add_parser(
        "estimate",
        help="the mismatched share (with a valid interval) from your answers on the audit's random sample",
        description="Read your answers on the first pairs of the audit's random order (the review "
        "page's 'check a sample', or sample.csv's first rows judged by any means) and estimate the "
        "share of mismatched pairs with an interval that stays valid wherever you stopped; with "
        "--fdr, also the pairs to drop with that false-discovery rate against your answers.",
    )
    estimate.add_argument("audit", help="the audit's folder (the --out of `mispair audit`)")
    estimate.add_argument(
        "--labels",
        nargs="+",
        required=True,
        metavar="FILE",
        help="labels-<audit_id>.csv from the review page (pair_id,label: correct, mismatched, unsure), "
        "or its decisions file; several files: several reviewers, merged (disagreements unsure)",
    )
    estimate.add_argument(
        "--fdr",
        type=float,
        help="also drop the largest cut of the ranking whose share of correct pairs your answers "
        "inside it prove at most this rate, with 95%% confidence (estimate_pairs.csv: every pair, "
        "suspected or not; apply --decisions takes it)",
    )
    estimate.add_argument("--json", action="store_true", help="print estimate.json instead of lines")
    estimate.set_defaults(run=run_estimate)


def run_estimate(args: argparse.Namespace) -> None:
    from mispair.audit.estimate_folder import estimate_folder

    folder = Path(args.audit)
    result = estimate_folder(folder, args.labels, fdr=args.fdr)
    written = result.save(folder)
    if args.json:
        json.dump(result.to_dict(), sys.stdout, indent=2, allow_nan=False)
        print()
        return
    print("\n".join(result.lines()))
    print(f"wrote {', '.join(str(p) for p in written)}")

"""``mispair audit``: every pair of a collection ranked by how likely it is mismatched."""

from __future__ import annotations

import argparse
from pathlib import Path

from mispair.cli.options import (
    OVERWRITE_HELP,
    Subparsers,
    column_options,
    column_overrides,
    process_options,
    ranged,
    require_collection,
)
from mispair.progress import QUIET_HELP, log_line


def _cmd_audit(args: argparse.Namespace) -> None:
    if not args.config and not any(o.startswith("data.source=") for o in args.overrides):
        require_collection(args.data)  # a config may name a source that reads no path
    from mispair import distributed
    from mispair.audit import audit_collection

    if args.nproc > 1 and not distributed.launched():  # this command again, in each of nproc processes
        distributed.launch(args.nproc, args.argv)
        return
    result = audit_collection(
        args.data,
        args.out,
        config_path=args.config,
        overrides=[*args.overrides, *column_overrides(args)],
        plant=args.plant,
        seed=args.seed,
        clean_run=args.clean_run,
        images=args.images,
        top=args.top,
        resume=not args.no_resume,
        progress=not args.quiet,
        log=log_line,
        overwrite=args.overwrite,
        timeout=args.timeout or distributed.DEFAULT_TIMEOUT,
        fdr=args.fdr,
        labels=args.labels or (),
        reseeds=args.reseeds,
    )
    if result is not None:  # rank 0 (or the only process) ranked the pairs and wrote the report
        print("\n".join(result.summary.lines(Path(args.out))))


def add_parsers(sub: Subparsers) -> None:
    """``mispair audit``."""
    audit = sub.add_parser("audit", help="rank a collection's pairs by how likely they are mismatched")
    audit.add_argument(
        "data",
        help="your collection: a folder, a table file (.csv .tsv .jsonl .parquet), "
        "WebDataset shards, a COCO/Karpathy JSON, a Hugging Face save_to_disk folder, or a precomputed "
        "folder",
    )
    audit.add_argument("overrides", nargs="*", default=[], help="key=value overrides of the audit's run")
    audit.add_argument("--out", required=True, help="output folder (report.html, pairs.csv, summary.json)")
    audit.add_argument("--config", help="a YAML config instead of the audit's default run")
    audit.add_argument(
        "--plant", type=float, help="swap this share of the pairs first and score the audit on them"
    )
    audit.add_argument("--seed", type=ranged("seed"), default=0, help="seed of the planted swaps")
    audit.add_argument(
        "--clean-run",
        action="store_true",
        help="also train the same run without the planted noise, for comparison",
    )
    audit.add_argument("--images", help="where a precomputed collection's pictures lie (for thumbnails)")
    audit.add_argument(
        "--fdr",
        type=float,
        default=0.1,
        help="suspect the pairs a cut at this estimated false-discovery rate drops (default 0.1: "
        "about 10%% of the suspected pairs are matched ones)",
    )
    audit.add_argument(
        "--top",
        type=ranged("top"),
        default=None,
        help=(
            "only the N most suspect pairs in the report, 0 to 1,000,000 (default: every pair up to "
            "100,000, else the 100,000 most suspect; pairs.csv holds every pair)"
        ),
    )
    audit.add_argument(
        "--no-resume",
        action="store_true",
        help="train again even if the output folder holds a finished or interrupted run",
    )
    audit.add_argument(
        "--labels",
        nargs="+",
        metavar="FILE",
        help="your answers on pairs (labels files from `Check a sample`; several reviewers merged; "
        "another audit's refused): the scorers trust the pairs judged correct and never train on "
        "those judged mismatched, and the verdicts follow them (judged correct: never suspected; "
        "judged mismatched: always); when they are the first pairs of this audit's sample, their "
        "estimate is printed too",
    )
    audit.add_argument(
        "--reseeds",
        type=int,
        default=1,
        metavar="K",
        help="train the audit K times in all, with other seeds, and say in how many of them each pair "
        "is suspected (pairs.csv's suspected_in_reseeds) and how far the share moved; K times the "
        "training (default 1: once)",
    )
    column_options(audit)
    audit.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    audit.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    process_options(audit, "audit")
    audit.set_defaults(run=_cmd_audit)

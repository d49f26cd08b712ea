"""``mispair apply``: the cleaned collection written from the decisions on an audit."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from mispair.cli.options import (
    Subparsers,
)
from mispair.errors import ConfigError, DataError

if TYPE_CHECKING:
    from mispair.audit.join_findings import JoinFindings


def _cmd_apply(args: argparse.Namespace) -> None:
    folder, decisions = Path(args.audit), Path(args.decisions) if args.decisions else None
    if not (folder / "summary.json").is_file() or not (folder / "pairs.parquet").is_file():
        raise DataError(
            f"{folder}: not a finished audit folder (no summary.json and pairs.parquet); "
            "give the --out folder of `mispair audit`"
        )
    if decisions is None and args.fdr is None and args.threshold is None and not args.repair:
        raise ConfigError(
            "--decisions: give the decisions file, or --fdr / --threshold to drop by the audit's numbers, "
            "or --repair"
        )
    if decisions is not None and not decisions.is_file():
        raise DataError(
            f"--decisions {decisions}: no such file; give the decisions.csv the report downloaded"
        )
    from mispair.audit.result import AuditResult
    from mispair.audit.writers import parse_bytes

    audit = AuditResult.load(args.audit)
    applied = audit.apply(
        args.decisions,
        args.out,
        threshold=args.threshold,
        fdr=args.fdr,
        overwrite=args.overwrite,
        format=args.format,
        shard_bytes=parse_bytes(args.shard_size),
        repair=args.repair,
    )
    if args.repair and audit.structure is not None:
        print(_repaired(audit.structure))
    files = applied.files or []
    written = f" as {applied.form} ({', '.join(files[:3])}{', ...' * (len(files) > 3)})" if files else ""
    refused = 0 if audit.refused is None else len(audit.refused)
    listed = folder / "refused.csv"
    unread = f"; the {refused} row(s) the audit refused are not in it ({listed})" if refused else ""
    print(
        f"wrote {applied.folder}{written}: {applied.kept} pairs kept "
        f"({applied.replaced} with a new caption), {applied.removed} removed; images "
        f"{applied.linked} hard-linked, {applied.copied} copied; the reasons in keep.csv and "
        f"removed.csv, the kept pair ids in keep_keys.txt{unread}"
    )


def _repaired(structure: JoinFindings) -> str:
    """What ``--repair`` asked for, in one line (a person's decisions may have overridden some)."""
    if not structure.shifts:
        return "repair: the audit found no shifted captions; nothing moved"
    return (
        f"repair: {structure.moves} captions of {len(structure.shifts)} shift run(s) moved back to their "
        f"own pictures; {structure.lost} pair(s) whose own caption is lost dropped (decide keep for them in "
        "--decisions to keep them; every move and drop is listed in the audit's repair.csv; found by the "
        "scores alone, not checked by any answer)"
    )


def add_parsers(sub: Subparsers) -> None:
    """``mispair apply``."""
    apply = sub.add_parser("apply", help="write the cleaned collection from your decisions on an audit")
    apply.add_argument("audit", help="the audit's folder (the --out of `mispair audit`)")
    apply.add_argument(
        "--decisions",
        help="decisions.csv from the report: pair_id,decision,caption (keep, drop, replace), or "
        "estimate_pairs.csv from `mispair estimate` (suspected: true or false); optional with --fdr "
        "or --threshold",
    )
    apply.add_argument("--out", required=True, help="a new folder for the cleaned collection")
    apply.add_argument(
        "--threshold",
        type=float,
        help="also drop the undecided pairs whose mismatch probability is at least this",
    )
    apply.add_argument(
        "--fdr",
        type=float,
        help="also drop the undecided pairs of the cut at this estimated false-discovery rate "
        "(their q-value at most this: e.g. 0.05, about 5%% of the dropped pairs matched ones)",
    )
    apply.add_argument(
        "--format",
        choices=("same", "folder"),
        default="same",
        help="same: the collection's own form (a table file, a folder with its captions file, "
        "WebDataset shards, an imagefolder, COCO JSON); folder: a folder of pictures with "
        "captions.csv (image,caption,pair_id[,split]) (default: same)",
    )
    apply.add_argument(
        "--shard-size",
        metavar="SIZE",
        help="WebDataset output: shards of at most this size (e.g. 100MB; default: one per input shard)",
    )
    apply.add_argument(
        "--repair",
        action="store_true",
        help="move each caption of the audit's shift runs (structure.json) back to its own picture and "
        "drop the rows whose own caption is lost; your --decisions override it pair by pair",
    )
    apply.add_argument(
        "--overwrite",
        action="store_true",
        help="write into an existing --out: an earlier cleaned collection holding only apply's "
        "files is replaced; any other folder gets apply's files, nothing else there touched",
    )
    apply.set_defaults(run=_cmd_apply)

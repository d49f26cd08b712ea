"""``mispair export`` and ``mispair import``: an audit to FiftyOne or Label Studio, and a
person's answers there back as mispair's labels and decisions files (:mod:`mispair.exchange`).
Parses, calls, prints; the libraries load only when a command runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.errors import ConfigError, DataError

if TYPE_CHECKING:
    from mispair.exchange.judgements import Review

TOOLS = ("fiftyone", "label-studio")
SHOWN = 10
"""How many disagreements and ambiguous pictures are printed (all are counted)."""


def add_parsers(sub: Any) -> None:
    """Add ``export`` and ``import`` to the command line's subcommands ``sub``."""
    _export_parser(sub)
    _import_parser(sub)


def _export_parser(sub: Any) -> None:
    export = sub.add_parser(
        "export",
        help="open an audit in FiftyOne or as Label Studio tasks",
        description="mispair export AUDIT --to fiftyone --name NAME (a FiftyOne dataset: pip install "
        "'mispair[fiftyone]'), or mispair export AUDIT --to label-studio --sample N --out DIR "
        "(DIR/tasks.json and DIR/config.xml).",
    )
    export.add_argument("audit", help="the audit's folder (the --out of `mispair audit`)")
    export.add_argument("--to", required=True, choices=TOOLS, help="the tool")
    export.add_argument("--name", help="fiftyone: the dataset's name")
    export.add_argument("--overwrite", action="store_true", help="fiftyone: replace a dataset of that name")
    export.add_argument("--out", help="label-studio: the folder for tasks.json and config.xml")
    export.add_argument(
        "--sample",
        type=_count,
        metavar="N",
        help="label-studio: the first N pairs of the audit's random sample",
    )
    export.add_argument("--suspects", action="store_true", help="label-studio: the suspected pairs")
    export.add_argument(
        "--local-files",
        metavar="FOLDER",
        help="label-studio: name the pictures by Label Studio's local storage below FOLDER (its "
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT) instead of inline thumbnails",
    )
    export.add_argument(
        "--picture-size",
        type=_count,
        default=384,
        metavar="PIXELS",
        help="label-studio: inline pictures' size",
    )
    export.set_defaults(run=_cmd_export)


def _import_parser(sub: Any) -> None:
    imports = sub.add_parser(
        "import",
        help="read answers given in FiftyOne or Label Studio as labels and decisions",
        description="mispair import AUDIT --from fiftyone --name NAME --out decisions.csv, or mispair "
        "import AUDIT --from label-studio EXPORT.json --out labels.csv [--decisions decisions.csv].",
    )
    imports.add_argument("audit", help="the audit's folder (the --out of `mispair audit`)")
    imports.add_argument(
        "--from",
        dest="source",
        nargs="+",
        required=True,
        metavar="TOOL [EXPORT]",
        help="fiftyone, or label-studio and the project's JSON export",
    )
    imports.add_argument("--name", help="fiftyone: the dataset's name")
    imports.add_argument(
        "--out", required=True, help="fiftyone: the decisions file to write; label-studio: the labels file"
    )
    imports.add_argument("--labels", help="fiftyone: also write the labels file (pair_id,label)")
    imports.add_argument(
        "--decisions", help="label-studio: also write the decisions file for `mispair apply`"
    )
    imports.add_argument("--overwrite", action="store_true", help="replace existing output files")
    imports.set_defaults(run=_cmd_import)


def _count(text: str) -> int:
    if not text.isdecimal() or not 0 < int(text) <= 10_000_000:
        raise argparse.ArgumentTypeError(f"must be a whole number in [1, 10,000,000], got {text!r}")
    return int(text)


def _audit_folder(folder: str) -> Path:
    path = Path(folder)
    if not (path / "summary.json").is_file() or not (path / "pairs.parquet").is_file():
        raise DataError(
            f"{path}: not a finished audit folder (no summary.json and pairs.parquet); "
            "give the --out folder of `mispair audit`"
        )
    return path


def _cmd_export(args: argparse.Namespace) -> None:
    folder = _audit_folder(args.audit)
    if args.to == "fiftyone":
        if not args.name:
            raise ConfigError("--to fiftyone needs --name NAME (the dataset's name)")
        return _export_fiftyone(folder, args.name, args.overwrite)
    if not args.out:
        raise ConfigError("--to label-studio needs --out DIR (for tasks.json and config.xml)")
    from mispair.audit.audit_folder import read_audit_folder
    from mispair.exchange.label_studio_tasks import write_tasks

    read = read_audit_folder(folder)
    done = write_tasks(
        folder,
        read.pairs,
        read.summary,
        args.out,
        sample=args.sample,
        suspects=args.suspects,
        local_files=args.local_files,
        size=args.picture_size,
    )
    print(
        f"wrote {done.folder}/tasks.json ({done.sample} pairs of the sample, {done.suspects} "
        f"suspects; {done.size / 2**20:.1f} MB) and {done.folder}/config.xml: create a Label Studio "
        "project with config.xml as its labelling interface and import tasks.json"
    )


def _export_fiftyone(folder: Path, name: str, overwrite: bool) -> None:
    from mispair.audit.result import AuditResult

    dataset = AuditResult.load(folder).to_fiftyone(name, overwrite=overwrite)
    print(
        f"FiftyOne dataset {name!r}: {len(dataset)} pictures, {dataset.count('captions.classifications')} "
        f"captions; open it with: fiftyone app launch {name}"
    )


def _cmd_import(args: argparse.Namespace) -> None:
    tool, *export = args.source
    if tool not in TOOLS:
        raise ConfigError(f"--from {tool}: one of {', '.join(TOOLS)}")
    if tool == "fiftyone" and (export or not args.name or args.decisions):
        raise ConfigError("--from fiftyone takes --name NAME, --out decisions.csv and --labels labels.csv")
    if tool == "label-studio" and (len(export) != 1 or args.name or args.labels):
        raise ConfigError(
            "--from label-studio takes the export: --from label-studio export.json --out labels.csv "
            "[--decisions decisions.csv]"
        )
    folder = _audit_folder(args.audit)
    outputs = [p for p in (args.out, args.labels, args.decisions) if p]
    for path in outputs:
        if Path(path).exists() and not args.overwrite:
            raise ConfigError(f"{path}: exists; give another file name or --overwrite")
    if tool == "fiftyone":
        _import_fiftyone(folder, args)
    else:
        _import_label_studio(folder, Path(export[0]), args)


def _import_fiftyone(folder: Path, args: argparse.Namespace) -> None:
    from mispair.audit.audit_folder import read_audit_folder
    from mispair.exchange.fiftyone_tags import fiftyone_answers
    from mispair.exchange.judgements import review_of, write_decisions, write_labels

    read = read_audit_folder(folder)
    audit_id = read.summary.get("audit_id")
    answers = fiftyone_answers(args.name, read.pairs, audit_id)
    if answers.ambiguous:
        _warn(
            f"{len(answers.ambiguous)} picture(s) with several captions tagged as a whole were not read "
            f"(tag their captions instead): {_first(answers.ambiguous)}"
        )
    review = review_of(answers.judgements, read.pairs["pair_id"])
    write_decisions(review, args.out)
    if args.labels:
        write_labels(review, args.labels, audit_id)
    print(f"{_counts(review)}; wrote {args.out}" + (f" and {args.labels}" if args.labels else ""))


def _import_label_studio(folder: Path, export: Path, args: argparse.Namespace) -> None:
    from mispair.audit.audit_folder import read_audit_folder
    from mispair.exchange.judgements import review_of, write_decisions, write_labels
    from mispair.exchange.label_studio_answers import read_export

    read = read_audit_folder(folder)
    audit_id = read.summary.get("audit_id")
    answers = read_export(export, audit_id)
    review = review_of(answers.judgements, read.pairs["pair_id"])
    only = answers.sample_pairs or None
    write_labels(review, args.out, audit_id, only=only)
    if args.decisions:
        write_decisions(review, args.decisions)
    reviewers = ", ".join(review.merged.reviewers)
    print(f"{answers.tasks} tasks, answers by {reviewers} ({answers.skipped} skipped); {_counts(review)}")
    _print_agreement(review)
    what = "the sample's answers" if only else "every answer"
    print(f"wrote {args.out} ({what})" + (f" and {args.decisions}" if args.decisions else ""))


def _counts(review: Review) -> str:
    labels = review.labels["label"].value_counts()
    decisions = review.decisions["decision"].value_counts()
    return (
        f"{len(review.labels)} pairs judged: {labels.get('correct', 0)} correct, "
        f"{labels.get('mismatched', 0)} mismatched ({decisions.get('replace', 0)} with a corrected "
        f"caption), {labels.get('unsure', 0)} unsure"
    )


def _print_agreement(review: Review) -> None:
    for pair, kappa in review.merged.kappa.items():
        print(
            f"Cohen's kappa {pair}: "
            + ("undefined (too few pairs judged by both)" if kappa is None else f"{kappa:.2f}")
        )
    split = review.merged.disagreements
    if len(split):
        print(f"{len(split)} pair(s) judged differently (labelled unsure):")
        for _, row in split.head(SHOWN).iterrows():
            answers = ", ".join(f"{who} {row[who] or '-'}" for who in review.merged.reviewers)
            print(f"  {row['pair_id']}: {answers}")
    conflicts = review.caption_conflicts
    if len(conflicts):
        print(f"{len(conflicts)} pair(s) with different corrected captions (dropped, not re-captioned):")
        for _, row in conflicts.head(SHOWN).iterrows():
            print(f"  {row['pair_id']}: {row['captions']}")


def _first(items: list[str]) -> str:
    return ", ".join(items[:SHOWN]) + (", ..." if len(items) > SHOWN else "")


def _warn(message: str) -> None:
    print(f"mispair: warning: {message}", file=sys.stderr)

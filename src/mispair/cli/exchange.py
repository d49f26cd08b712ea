"""``mispair export`` and ``mispair import``: an audit to FiftyOne or Label Studio, and a
person's answers there back as mispair's labels and decisions files (:mod:`mispair.exchange`).
Parses, calls, prints; the libraries load only when a command runs. Every output follows the
output rules of the other commands (:mod:`mispair.output_folder`: a marked folder, distinct files,
no link, ``--overwrite``), and every value printed from someone else's file is cut and
terminal-safe (:func:`mispair.safe_io.shown`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.errors import ConfigError, DataError
from mispair.safe_io import SHOWN_ITEMS, listed, shown

if TYPE_CHECKING:
    from mispair.exchange.judgements import Review

TOOLS = ("fiftyone", "label-studio")
SHOWN = SHOWN_ITEMS
"""How many disagreements and ambiguous pictures are printed (all are counted)."""
AUDIT_FILES = ("summary.json", "pairs.parquet", "pairs.csv", "sample.csv", "report.html", "pairs.js")
"""The audit's files an import never writes over."""


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
    export.add_argument(
        "--overwrite",
        action="store_true",
        help="fiftyone: replace a dataset of that name; label-studio: write tasks.json and config.xml "
        "into a folder mispair did not create",
    )
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
        overwrite=args.overwrite,
    )
    print(
        f"wrote {shown(done.folder)}/tasks.json ({done.sample} pairs of the sample, {done.suspects} "
        f"suspects; {done.size / 2**20:.1f} MB) and {shown(done.folder)}/config.xml: create a Label "
        "Studio project with config.xml as its labelling interface and import tasks.json"
    )


def _export_fiftyone(folder: Path, name: str, overwrite: bool) -> None:
    from mispair.audit.result import AuditResult

    dataset = AuditResult.load(folder).to_fiftyone(name, overwrite=overwrite)
    print(
        f"FiftyOne dataset {shown(name)!r}: {len(dataset)} pictures, "
        f"{dataset.count('captions.classifications')} captions; "
        f"open it with: fiftyone app launch {shown(name)}"
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
    from mispair.output_folder import check_outputs

    inputs = {f"the audit's {name}": folder / name for name in AUDIT_FILES}
    check_outputs(
        {"--out": args.out, "--labels": args.labels, "--decisions": args.decisions},
        overwrite=args.overwrite,
        inputs={**inputs, "the export": export[0] if export else None},
    )
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
            f"(tag their captions instead): {listed(answers.ambiguous)}"
        )
    review = review_of(answers.judgements, read.pairs["pair_id"])
    write_decisions(review, args.out)
    if args.labels:
        write_labels(review, args.labels, audit_id)
    print(
        f"{_counts(review)}; wrote {shown(args.out)}" + (f" and {shown(args.labels)}" if args.labels else "")
    )


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
    from mispair.estimate.labels import NAME_CHARS

    reviewers = listed(review.merged.reviewers, chars=NAME_CHARS)
    print(f"{answers.tasks} tasks, answers by {reviewers} ({answers.skipped} skipped); {_counts(review)}")
    _print_agreement(review)
    what = "the sample's answers" if only else "every answer"
    print(f"wrote {shown(args.out)} ({what})" + (f" and {shown(args.decisions)}" if args.decisions else ""))


def _counts(review: Review) -> str:
    labels = review.labels["label"].value_counts()
    decisions = review.decisions["decision"].value_counts()
    return (
        f"{len(review.labels)} pairs judged: {labels.get('correct', 0)} correct, "
        f"{labels.get('mismatched', 0)} mismatched ({decisions.get('replace', 0)} with a corrected "
        f"caption), {labels.get('unsure', 0)} unsure"
    )


def _print_agreement(review: Review) -> None:
    """Cohen's κ of every two annotators (up to :data:`KAPPA_LISTED` of them; beyond, one line of
    its summary), the first disagreements and caption conflicts: a bounded number of lines, each
    bounded, every name, pair id and caption cut and terminal-safe."""
    from mispair.estimate.labels import KAPPA_LISTED, NAME_CHARS, answers_text

    merged = review.merged
    if len(merged.reviewers) > KAPPA_LISTED:
        print(merged.agreement().text())
    else:
        for pair, kappa in merged.kappa.items():
            print(
                f"Cohen's kappa {shown(pair, 2 * NAME_CHARS + 3)}: "
                + ("undefined (too few pairs judged by both)" if kappa is None else f"{kappa:.2f}")
            )
    split = merged.disagreements
    if len(split):
        print(f"{len(split)} pair(s) judged differently (labelled unsure):")
        for row in split.head(SHOWN).to_dict(orient="records"):
            print(f"  {shown(row['pair_id'])}: {answers_text(row['answers'], ' ')}")
        if len(split) > SHOWN:
            print(f"  ... and {len(split) - SHOWN:,} more")
    conflicts = review.caption_conflicts
    if len(conflicts):
        print(f"{len(conflicts)} pair(s) with different corrected captions (dropped, not re-captioned):")
        for row in conflicts.head(SHOWN).to_dict(orient="records"):
            print(f"  {shown(row['pair_id'])}: {shown(row['captions'])}")
        if len(conflicts) > SHOWN:
            print(f"  ... and {len(conflicts) - SHOWN:,} more")


def _warn(message: str) -> None:
    print(f"mispair: warning: {message}", file=sys.stderr)

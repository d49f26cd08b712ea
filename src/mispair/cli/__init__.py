"""The ``mispair`` command line: parses, calls the library, prints. No logic lives here; each verb is
a module of this package with ``add_parsers(sub)`` (its parser and its handler).
"""
# The user's page of ``mispair --help`` is USAGE below; this docstring is for developers.

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

from mispair.cli import (
    apply,
    audit,
    cache,
    estimate,
    evaluate,
    exchange,
    index,
    inject_noise,
    prepare,
    recipes,
    search,
    serve,
    train,
)
from mispair.cli.options import RangeHelp
from mispair.errors import MispairError
from mispair.progress import set_quiet

VERBS = (
    train,
    audit,
    apply,
    estimate,
    exchange,
    evaluate,
    index,
    search,
    serve,
    inject_noise,
    recipes,
    prepare,
    cache,
)
"""The verbs' modules, in the order ``mispair --help`` lists them."""
USAGE = """\
Find the mismatched pairs of an image–caption collection, review them, and train a retriever that
stays accurate when many pairs are wrong.

A collection is a folder (images + captions.csv/.tsv/.jsonl, or a Hugging Face imagefolder
metadata file), a table file (.csv .tsv .jsonl .parquet, image paths or image bytes), WebDataset
tar shards, a COCO or Karpathy captions JSON, or a precomputed features folder.

  audit     rank every pair by how likely it is mismatched; writes report.html, pairs.csv
              mispair audit photos/ --out runs/photos-audit
  apply     write the cleaned collection from your decisions on an audit (its report's decisions.csv)
              mispair apply runs/photos-audit --decisions decisions.csv --out photos-clean
  estimate  the mismatched share, proven by your answers on the audit's random sample
              mispair estimate runs/photos-audit --labels labels.csv
  export    open an audit in FiftyOne, or as Label Studio tasks
              mispair export runs/photos-audit --to label-studio --sample 200 --out ls/
  import    answers given in FiftyOne or Label Studio as labels and decisions files
              mispair import runs/photos-audit --from label-studio export.json --out labels.csv
  train     train a retriever (the robust recipe by default) on a collection or a config
              mispair train photos/ --out runs/photos
  eval      retrieval metrics (R@K, rSum) of a checkpoint
              mispair eval runs/photos/best.pt
  index     embed a collection into a search index
              mispair index runs/photos/best.pt photos/ --out runs/photos.index
  search    search an index by text, or by --image for captions
              mispair search runs/photos.index "a red apple"
  prepare   build the offline datasets (tuxpaint, openclipart) or a synthetic one
              mispair prepare tuxpaint
  recipes   list the training recipes, similarity heads and text encoders
  cache     what the cache folder holds (each picture's features once) and its size; prune it
              mispair cache prune --max-size 2G

`mispair COMMAND --help` tells a command's options. Columns are found by their usual names
(image, file_name, path; caption, text, alt_text, title) or named with --image-column and
--caption-column.
"""


class _Parser(argparse.ArgumentParser):
    """argparse with a usage mistake reported as every other mistake: one line, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"mispair: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(2)

    def _get_formatter(self) -> argparse.HelpFormatter:
        if self.formatter_class is argparse.HelpFormatter:
            return RangeHelp(prog=self.prog)
        return super()._get_formatter()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mispair",
        description=USAGE,
        usage="mispair COMMAND [options]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", prog="mispair")
    for verb in VERBS:
        verb.add_parsers(sub)
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line's arguments; ``key=value`` overrides of ``train`` may also follow its
    options (``mispair train --out runs/x train.epochs=5``)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if (
        extra
        and getattr(args, "command", None) in ("train", "audit")
        and all("=" in e and not e.startswith("-") for e in extra)
    ):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _one_line_warning(
    message: Warning | str, category: type[Warning], *args: object, **kwargs: object
) -> str:
    return f"mispair: warning: {message}\n"


def _os_error(exc: OSError) -> str:
    """An operating-system error as one line naming the path (cut to 200 characters)."""
    name = str(exc.filename) if exc.filename is not None else ""
    name = name if len(name) <= 200 else name[:200] + "..."
    reason = exc.strerror or str(exc)
    return f"{name}: {reason} (check the path, its permissions and the free space)" if name else reason


def main(argv: Sequence[str] | None = None) -> int:
    warnings.formatwarning = _one_line_warning  # a warning is one line, like an error
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    args.argv = argv  # what --nproc runs again in each process
    set_quiet(getattr(args, "quiet", False))  # every progress bar, also those deep in data loading
    rank = os.environ.get("RANK", "0")
    where = "" if rank == "0" else f"process {rank}: "  # the others of a multi-process run
    try:
        args.run(args)
    except MispairError as exc:
        print(f"mispair: error: {where}{exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path, a permission, a full disk: the system refused what the user gave
        print(f"mispair: error: {where}{_os_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mispair: interrupted (rerun the same command to resume)", file=sys.stderr)
        return 130
    return 0

"""``mispair train``: a retriever trained on a collection or a config."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mispair.atomic import atomic_text
from mispair.cli.options import (
    CONFIG_SUFFIXES,
    OVERWRITE_HELP,
    Subparsers,
    column_options,
    column_overrides,
    exists,
    process_options,
)
from mispair.errors import ConfigError
from mispair.progress import QUIET_HELP, log_line


def _cmd_train(args: argparse.Namespace) -> None:
    path, overrides = args.config, list(args.overrides) + column_overrides(args)
    if path and "=" in path and not exists(path):
        path, overrides = None, [path, *overrides]
    data = args.data
    if path and not exists(path):
        raise ConfigError(
            f"{path}: no such config file or collection (give a YAML config from configs/, "
            "or the path of your collection: a folder, a table file, shards)"
        )
    if path and (Path(path).is_dir() or Path(path).suffix.lower() not in CONFIG_SUFFIXES):
        if data:
            raise ConfigError(f"{path} and --data {data}: two collections; give one (`mispair train PATH`)")
        path, data = None, path
    from mispair import distributed
    from mispair.api import training_config
    from mispair.engine.held_out.answers import answers_overrides
    from mispair.engine.run import train_run

    overrides += answers_overrides(args.labels or ())
    config = training_config(path, overrides, data=data, log=log_line)
    if args.labels and config.recipe != "holdout":
        raise ConfigError(
            f"--labels: recipe {config.recipe} does not take a person's answers; recipe holdout "
            "(the default for a collection) does"
        )
    if args.out:
        config.output = args.out
    export = Path(args.export_pairs) if args.export_pairs else None
    if export is not None and not export.parent.is_dir():  # before training, not after
        raise ConfigError(f"--export-pairs {export}: no such directory {export.parent}")
    if export is not None and (export.is_symlink() or (export.exists() and not export.is_file())):
        raise ConfigError(
            f"--export-pairs {export}: a folder, a link or another non-file is there; give the path "
            "of the CSV file to write"
        )
    if args.nproc > 1 and not distributed.launched():  # this command again, in each of nproc processes
        distributed.launch(args.nproc, args.argv)
        return
    summary = train_run(
        config,
        resume=not args.no_resume,
        progress=not args.quiet,
        log=log_line,
        timeout=args.timeout or distributed.DEFAULT_TIMEOUT,
        overwrite=args.overwrite,
    )
    if not distributed.is_main_process():
        return
    from mispair.engine.metrics import format_metrics

    title = f"test ({config.output_dir / 'best.pt'}, best epoch {summary.best_epoch + 1})"
    print(format_metrics(summary.test, title))
    if export is not None:
        _export_pairs(config, export)


def _export_pairs(config, path: Path) -> None:
    from mispair.engine.export import export_training_pairs, pairs_csv

    rows = export_training_pairs(config)
    atomic_text(path, pairs_csv(rows))
    print(f"wrote {len(rows)} training pairs to {path}", file=sys.stderr)


def add_parsers(sub: Subparsers) -> None:
    """``mispair train``."""
    train = sub.add_parser(
        "train",
        help="train a retriever on a collection or a config",
        description="Train on a collection (`mispair train photos/`: the robust holdout recipe) or as a "
        "YAML config says (`mispair train configs/vse/tuxpaint.yaml`); with no argument, the embedded "
        "default run on data/tuxpaint_precomp.",
    )
    train.add_argument("config", nargs="?", help="your collection (folder, table, shards) or a YAML config")
    train.add_argument("overrides", nargs="*", default=[], help="key=value overrides, e.g. train.epochs=5")
    train.add_argument(
        "--data",
        help="with a config: train it on this collection instead (no noise is "
        "planted into it unless data.noise.rate is set on the command line)",
    )
    column_options(train)
    train.add_argument("--out", help="output directory (default runs/<name>)")
    train.add_argument("--no-resume", action="store_true", help="start over even if last.pt exists")
    train.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    train.add_argument("--export-pairs", help="write every training pair with its scores (CSV)")
    train.add_argument(
        "--labels",
        nargs="+",
        metavar="FILE",
        help="your answers on the collection's pairs (the audit's labels files; another audit's "
        "refused): train on the raw collection with them, not on a cleaned copy. A pair judged "
        "correct is trusted, one judged mismatched trains only as a negative (the recipe's "
        "complementary side), whatever the scores say; the held-out scorers follow them too "
        "(recipe holdout, the default)",
    )
    train.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    process_options(train, "train")
    train.set_defaults(run=_cmd_train)

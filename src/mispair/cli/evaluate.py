"""``mispair eval``: a checkpoint's retrieval metrics (R@K, rSum), or an index's."""

from __future__ import annotations

import argparse
import json

from mispair.cli.options import (
    Subparsers,
    ranged,
    require_checkpoint,
)
from mispair.errors import ConfigError


def _cmd_eval(args: argparse.Namespace) -> None:
    if args.index:
        return _eval_index(args)
    if args.top_k or args.rerank:
        raise ConfigError("--top-k and --rerank evaluate through an index: give --index INDEX")
    for checkpoint in args.checkpoint:
        require_checkpoint(checkpoint)
    from mispair.engine.run import evaluate_checkpoint

    metrics = evaluate_checkpoint(
        args.checkpoint,
        split=args.split,
        data_root=args.data_root,
        folds=args.folds,
        device=args.device,
        progress=not args.quiet,
    )
    if args.json:
        print(json.dumps(metrics, indent=2))
    else:
        from mispair.engine.metrics import format_metrics

        print(format_metrics(metrics, f"{' + '.join(args.checkpoint)} on {args.split or 'test'}"))


def _eval_index(args: argparse.Namespace) -> None:
    from mispair.search.storage import check_index_folder

    if len(args.checkpoint) > 1 or args.split or args.data_root or args.folds:
        raise ConfigError(
            "--index: evaluates one checkpoint on the index's own collection "
            "(no --split, --data-root, --folds or second checkpoint)"
        )
    check_index_folder(args.index)
    require_checkpoint(args.checkpoint[0])
    from mispair.search import Index, evaluate_index

    index = Index.load(args.index, checkpoint=args.checkpoint[0], device=args.device)
    metrics = evaluate_index(index, k=args.top_k or 100, rerank=args.rerank or 0, progress=not args.quiet)
    lists = f"reranked top-{args.rerank}" if args.rerank else f"top-{args.top_k or 100} lists"
    if args.json:
        print(json.dumps(metrics, indent=2))
    else:
        from mispair.engine.metrics import format_metrics

        title = f"{args.checkpoint[0]} on {args.index} ({index.spec.describe()}, {lists})"
        print(format_metrics(metrics, title))


def add_parsers(sub: Subparsers) -> None:
    """``mispair eval``."""
    ev = sub.add_parser("eval", help="evaluate a checkpoint")
    ev.add_argument("checkpoint", nargs="+", help="one checkpoint, or several to average (SGR + SAF = SGRAF)")
    ev.add_argument("--split", help="split name (default: the config's test split)")
    ev.add_argument("--data-root", help="read the split from this precomputed directory")
    ev.add_argument("--folds", type=ranged("folds"), help="5 for the COCO 5-fold 1K protocol")
    ev.add_argument("--device", default="auto")
    ev.add_argument("--json", action="store_true", help="print the metrics as JSON")
    ev.add_argument("--index", help="evaluate on an index's collection from top-k lists (mispair index)")
    ev.add_argument("--top-k", type=ranged("top_k"), help="with --index: length of the lists (default 100)")
    ev.add_argument("--rerank", type=ranged("rerank"), help="with --index: rerank the first K with the head")
    ev.add_argument("--quiet", action="store_true")
    ev.set_defaults(run=_cmd_eval)

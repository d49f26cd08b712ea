"""``mispair prepare``: the offline datasets (Tux Paint, OpenClipart) or a synthetic one in the
precomputed format."""

from __future__ import annotations

import argparse

from mispair.cli.options import (
    Subparsers,
    runtime_option,
)


def _cmd_prepare(args: argparse.Namespace) -> None:
    if args.dataset == "synthetic":
        from mispair.data.synthetic import write_synthetic_dataset

        out = write_synthetic_dataset(args.out or "data/synthetic_precomp")
    else:
        from mispair.data.sources import PREPARERS
        from mispair.onnx_runtime import require_runtime

        options = {"lang": args.lang} if args.dataset == "tuxpaint" else {}
        if args.dataset == "openclipart" and args.captions:
            options["caption_source"] = args.captions
        kwargs = {"out": args.out} if args.out else {}
        if args.encoder_runtime:
            kwargs["runtime"] = require_runtime(args.encoder_runtime, "--encoder-runtime")
        out = PREPARERS[args.dataset](**kwargs, **options, progress=not args.quiet)
    print(f"prepared {args.dataset} in {out}")


def add_parsers(sub: Subparsers) -> None:
    """``mispair prepare``."""
    prep = sub.add_parser("prepare", help="build a dataset in the precomputed format")
    prep.add_argument("dataset", choices=("tuxpaint", "openclipart", "synthetic"))
    prep.add_argument("--out", help="output directory (default data/<dataset>_precomp)")
    prep.add_argument("--lang", default="en", help="Tux Paint caption language")
    prep.add_argument("--captions", help="OpenClipart caption source")
    prep.add_argument("--quiet", action="store_true")
    runtime_option(prep)
    prep.set_defaults(run=_cmd_prepare)

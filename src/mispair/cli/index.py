"""``mispair index``: a collection embedded by a checkpoint into a search index."""

from __future__ import annotations

import argparse
import sys

from mispair.cli.options import (
    Subparsers,
    column_options,
    data_options,
    ranged,
    require_checkpoint,
    require_collection,
)


def _cmd_index(args: argparse.Namespace) -> None:
    from mispair.search.storage import check_index_target

    require_checkpoint(args.checkpoint)
    require_collection(args.data)
    check_index_target(args.out)  # before the collection is embedded
    from mispair.search import Index, IndexSpec

    spec = IndexSpec(args.kind, args.nlist, args.nprobe, args.hnsw_m, args.ef_construction, args.ef_search)
    index = Index.build(
        args.checkpoint,
        args.data,
        split=args.split,
        spec=spec,
        device=args.device,
        progress=not args.quiet,
        log=lambda m: print(m, file=sys.stderr),
        data_options=data_options(args),
    )
    index.save(args.out)
    print(f"wrote {args.out}: {index.describe()}")


def add_parsers(sub: Subparsers) -> None:
    """``mispair index``."""
    index = sub.add_parser("index", help="embed a collection with a checkpoint into a search index")
    index.add_argument("checkpoint")
    index.add_argument("data", help="a collection in any form `mispair audit` reads")
    index.add_argument("--out", required=True, help="the index folder to write")
    index.add_argument("--split", default="all", help="split(s) to index, comma-separated, or all (default)")
    index.add_argument(
        "--kind",
        choices=("flat", "ivf", "hnsw"),
        default="flat",
        help="flat: exact (default); ivf, hnsw: approximate, for large collections",
    )
    index.add_argument("--nlist", type=ranged("nlist"), help="ivf: number of cells (default 4·√n)")
    index.add_argument("--nprobe", type=ranged("nprobe"), default=8, help="ivf: cells searched (default 8)")
    index.add_argument("--hnsw-m", type=ranged("m"), default=16, help="hnsw: links per vector (default 16)")
    index.add_argument(
        "--ef-construction", type=ranged("ef_construction"), default=100, help="hnsw (default 100)"
    )
    index.add_argument(
        "--ef-search", type=ranged("ef_search"), default=32, help="hnsw: search list (default 32)"
    )
    index.add_argument("--device", default="auto")
    index.add_argument("--quiet", action="store_true")
    column_options(index)
    index.set_defaults(run=_cmd_index)

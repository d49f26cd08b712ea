"""``mispair search``: an index searched by text, or by ``--image`` for captions."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from mispair.cli.options import Subparsers, check_opened_index, opened_index_options, ranged
from mispair.errors import ConfigError, DataError


def _cmd_search(args: argparse.Namespace) -> None:
    from mispair.search.queries import ONE_KIND_OF_QUERY, batches, check_rerank, query_texts
    from mispair.search.terminal import printable

    check_opened_index(args)
    if bool(args.image) == bool(args.query or args.queries):
        raise ConfigError(ONE_KIND_OF_QUERY)
    if args.image and not Path(args.image).is_file():
        raise DataError(f"--image {Path(args.image)}: no such file")
    check_rerank(args.top_k, args.rerank)
    texts = query_texts(args.query, args.queries)
    from mispair.search import Index

    index = Index.load(args.index, checkpoint=args.checkpoint, data=args.data, device=args.device)
    options = {"k": args.top_k, "rerank": args.rerank, "nprobe": args.nprobe, "ef_search": args.ef_search}
    show = _hits_printer(args, index)
    if args.image:
        show(
            "captions",
            {"image": args.image},
            f"image {printable(args.image)}",
            index.search(image=args.image, **options),
        )
        return
    lines = args.queries is not None or len(args.query) > 1  # JSON lines, one object per query
    for batch in batches(texts):
        for text, hits in zip(batch, index.search_texts(batch, **options)):
            show("images", {"query": text}, repr(text), hits, lines=lines)
        sys.stdout.flush()  # each batch's results while the next is searched


def _hits_printer(args: argparse.Namespace, index) -> Callable[..., None]:
    """A function printing one query's hits as ``--json`` asks: a JSON object (indented, or on one
    line for many queries) with the query as given, or the table under a title."""
    from mispair.search import hits_table
    from mispair.search.terminal import json_text

    rerank = ""
    if args.rerank:  # the head's name is in the checkpoint, opened only to rerank
        rerank = f", top {args.rerank} reranked by the {index.model.config.model.head} head"
    settings = f"{index.spec.with_search(args.nprobe, args.ef_search).describe()}{rerank}"
    first = True

    def show(found: str, query: dict, title: str, hits: list, lines: bool = False) -> None:
        nonlocal first
        if args.json:
            printed = {**query, "results": found, "hits": [h.to_dict() for h in hits]}
            print(json_text(printed, indent=None if lines else 2))
        else:
            print(("" if first else "\n") + hits_table(hits, f"{found} for {title} ({settings})"))
        first = False

    return show


def add_parsers(sub: Subparsers) -> None:
    """``mispair search``."""
    search = sub.add_parser(
        "search",
        help="search an index by text (images) or by --image (captions)",
        description="Search an index (`mispair index`) by one text or many: the index is loaded "
        "once and the texts are encoded and searched in batches. With --json, one query prints "
        "one JSON object, several print JSON lines (one object per query, in their order).",
    )
    search.add_argument("index")
    search.add_argument("query", nargs="*", default=[], help="texts: each finds images")
    search.add_argument(
        "--queries",
        metavar="FILE",
        help="more texts, one per line (blank lines skipped); - reads standard input",
    )
    search.add_argument("--image", help="a picture file: finds captions")
    search.add_argument("--top-k", type=ranged("top_k"), default=10, help="results shown (default 10)")
    search.add_argument(
        "--rerank",
        type=ranged("rerank"),
        default=0,
        help="order the first K candidates by the checkpoint's head (SGR, SAF, OMIT, CAM)",
    )
    search.add_argument("--nprobe", type=ranged("nprobe"), help="ivf: cells searched (default: the index's)")
    search.add_argument(
        "--ef-search", type=ranged("ef_search"), help="hnsw: search list (default: the index's)"
    )
    opened_index_options(search)
    search.add_argument("--json", action="store_true", help="print JSON (JSON lines for several queries)")
    search.add_argument("--quiet", action="store_true")
    search.set_defaults(run=_cmd_search)

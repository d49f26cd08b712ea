"""``mispair serve``: an index answering searches over HTTP (JSON), for its user only."""

from __future__ import annotations

import argparse
import sys

from mispair.cli.options import Subparsers, check_opened_index, opened_index_options, port


def _cmd_serve(args: argparse.Namespace) -> None:
    check_opened_index(args)
    from mispair.search.serve import require_server

    require_server()  # before the index is loaded
    from mispair.search import Index
    from mispair.search.serve import serve

    index = Index.load(args.index, checkpoint=args.checkpoint, data=args.data, device=args.device)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    serve(index, args.host, args.port, allow_hosts=args.allow_host, log=log)


def add_parsers(sub: Subparsers) -> None:
    """``mispair serve``."""
    serve = sub.add_parser(
        "serve",
        help="answer searches of an index over HTTP (JSON; pip install 'mispair[serve]')",
        description="Load an index once and answer searches over HTTP with JSON: GET /search?q=TEXT&k=10 "
        '(&rerank=K), POST /search with a JSON list of texts (["a red apple", ...], k and rerank '
        "as query parameters), GET /health. No authentication: it listens on 127.0.0.1 (this "
        "machine only) unless --host says otherwise, and answers only requests naming an allowed "
        "Host. Ctrl+C stops it.",
    )
    serve.add_argument("index")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=port, default=8000, help="the port (default 8000; 0: any free port)")
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name requests may give besides the loopback names and --host (repeatable)",
    )
    opened_index_options(serve)
    serve.set_defaults(run=_cmd_serve)

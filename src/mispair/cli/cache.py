"""``mispair cache``: what the cache folder holds, and ``prune`` to cut it."""

from __future__ import annotations

import argparse

from mispair.cli.options import Subparsers


def _cmd_cache(args: argparse.Namespace) -> None:
    from mispair.data.cache_folder import cache_root
    from mispair.data.cache_usage import cache_usage, human, prune
    from mispair.data.picture_store import parse_size

    root = cache_root()
    if args.action == "prune":
        limit = parse_size(args.max_size, "--max-size") if args.max_size else None
        old, old_bytes, gone, gone_bytes = prune(root, limit)
        print(
            f"mispair cache prune: removed {old:,} old-format chunks ({human(old_bytes)}) and "
            f"{gone:,} least recently used pictures' features ({human(gone_bytes)})"
        )
    print(f"mispair cache {cache_usage(root).line()}")


def add_parsers(sub: Subparsers) -> None:
    """``mispair cache``."""
    cache = sub.add_parser(
        "cache",
        help="show what the cache folder holds and its size; prune it",
        description="The cache folder ($MISPAIR_CACHE, else ~/.cache/mispair): each picture's "
        "features once per content, the collections' folders, old-format chunks. `prune` removes "
        "the old-format chunks and the least recently used features beyond the cap "
        "($MISPAIR_CACHE_MAX_BYTES, default 20G) or --max-size.",
    )
    cache.add_argument("action", nargs="?", choices=("show", "prune"), default="show")
    cache.add_argument("--max-size", help="with prune: keep at most this much of features (e.g. 500M, 2G)")
    cache.set_defaults(run=_cmd_cache)

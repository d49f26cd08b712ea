"""What a search is asked, checked before an index is opened: the query texts (arguments, a file
with one per line, or standard input) and the number of results.

Nothing here imports torch or FAISS, so the command line refuses a wrong request at once.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import TextIO

from mispair.errors import ConfigError, DataError

ONE_KIND_OF_QUERY = (
    'give a query text (`mispair search INDEX "a red apple"`) or --image PICTURE, exactly one of them'
)
QUERY_BATCH = 1024
"""Query texts encoded and searched together (the command line prints each batch's results as
soon as they are found)."""


def check_rerank(k: int, rerank: int) -> None:
    """A one-line error when more results are asked than the head reranks."""
    if rerank and k > rerank:
        raise ConfigError(f"--top-k {k}: at most --rerank {rerank} (the candidates the head orders)")


def query_texts(texts: Sequence[str], queries_file: str | None) -> Iterator[str]:
    """The query ``texts``, then each non-blank line of ``queries_file`` (``-``: standard input),
    read as they are searched; a file that is not there is a one-line error now, before any
    text is searched."""
    where = "standard input" if queries_file == "-" else f"--queries {queries_file}"
    if queries_file not in (None, "-") and not Path(queries_file).is_file():
        raise DataError(f"{where}: no such file (give a text file with one query per line, or -)")
    return _texts(texts, queries_file, where)


def _texts(texts: Sequence[str], queries_file: str | None, where: str) -> Iterator[str]:
    yield from texts
    if queries_file is None:
        return
    try:
        with open(queries_file, encoding="utf-8") if queries_file != "-" else _stdin() as lines:
            for line in lines:
                text = line.rstrip("\r\n")
                if text.strip():
                    yield text
    except UnicodeDecodeError:
        raise DataError(f"{where}: not UTF-8 text (give one query per line)") from None


def _stdin() -> contextlib.AbstractContextManager[TextIO]:
    """Standard input, left open."""
    return contextlib.nullcontext(sys.stdin)


def batches(texts: Iterable[str], size: int = QUERY_BATCH) -> Iterator[list[str]]:
    """``texts`` in lists of at most ``size``."""
    it = iter(texts)
    while batch := list(islice(it, size)):
        yield batch

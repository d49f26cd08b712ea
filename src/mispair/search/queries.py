"""What a search is asked, checked before an index is opened: the query texts (arguments, a file
with one per line, or standard input) and the number of results.

A query is read as the readers read a caption (:mod:`mispair.data.text_bounds`): UTF-8 text,
decoded strictly (undecodable bytes, in a file, on standard input or in an argument, are a
one-line error), and cut to ``MAX_TEXT_CHARS`` characters before it is tokenized. A line of a
queries file is read a bounded piece at a time, so a 30 MB line costs the bound in memory, not the
line. ``mispair search`` and ``mispair serve`` share these functions.

Nothing here imports torch or FAISS, so the command line refuses a wrong request at once.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import TextIO

from mispair.data.text_bounds import CHUNK_CHARS, warn_cut
from mispair.errors import ConfigError, DataError
from mispair.limits import limit

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


def cut_queries(texts: Sequence[str], where: str = "query") -> tuple[list[str], int]:
    """``texts`` as queries: each checked to be text (:func:`check_text`) and cut to
    ``MAX_TEXT_CHARS`` characters, as every reader cuts a caption; and how many were cut."""
    bound = limit("MAX_TEXT_CHARS")
    for number, text in enumerate(texts, start=1):
        check_text(text[: bound + 1], f"{where} {number}" if len(texts) > 1 else where)
    return [text[:bound] for text in texts], sum(len(text) > bound for text in texts)


def check_text(text: str, where: str) -> str:
    """``text`` when it encodes as UTF-8; a one-line error for a lone surrogate (the bytes of an
    argument that were not UTF-8, or a ``\\ud800`` escape of a JSON request)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DataError(f"{where}: not UTF-8 text (undecodable at character {exc.start})") from None
    return text


def query_texts(texts: Sequence[str], queries_file: str | None) -> Iterator[str]:
    """The query ``texts``, then each non-blank line of ``queries_file`` (``-``: standard input),
    read as they are searched, each cut to ``MAX_TEXT_CHARS`` (one warning names the count); a
    file that is not there, or an argument that is not UTF-8, is a one-line error now, before any
    text is searched."""
    where = "standard input" if queries_file == "-" else f"--queries {queries_file}"
    if queries_file not in (None, "-") and not Path(queries_file).is_file():
        raise DataError(f"{where}: no such file (give a text file with one query per line, or -)")
    given, cut = cut_queries(list(texts))
    warn_cut(cut, "the query texts")
    return _texts(given, queries_file, where)


def _texts(texts: list[str], queries_file: str | None, where: str) -> Iterator[str]:
    yield from texts
    if queries_file is None:
        return
    bound, cut = limit("MAX_TEXT_CHARS"), 0
    try:
        with _opened(queries_file) as lines:
            while line := lines.readline(bound + 1):
                if len(line) > bound and not line.endswith("\n"):
                    _skip_rest_of_line(lines)
                text = line.removesuffix("\n").rstrip("\r")
                cut += len(text) > bound
                if text.strip():
                    yield text[:bound]
    except UnicodeDecodeError as exc:
        raise DataError(f"{where}: not UTF-8 text ({exc.reason}; one query a line)") from None
    warn_cut(cut, where)


def _skip_rest_of_line(handle: TextIO) -> None:
    while chunk := handle.readline(CHUNK_CHARS):
        if chunk.endswith("\n"):
            return


@contextlib.contextmanager
def _opened(name: str) -> Iterator[TextIO]:
    """The queries file ``name``, or (``-``) standard input read as bytes and decoded as strict
    UTF-8 whatever the locale, as a file is; standard input is left open."""
    if name != "-":
        with open(name, encoding="utf-8", newline="\n") as handle:
            yield handle
        return
    raw = getattr(sys.stdin, "buffer", None)
    if raw is None:  # a text stream put in its place (tests, a program embedding mispair)
        yield sys.stdin
        return
    wrapper = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", newline="\n")
    try:
        yield wrapper
    finally:
        wrapper.detach()


def batches(texts: Iterable[str], size: int = QUERY_BATCH) -> Iterator[list[str]]:
    """``texts`` in lists of at most ``size``."""
    it = iter(texts)
    while batch := list(islice(it, size)):
        yield batch

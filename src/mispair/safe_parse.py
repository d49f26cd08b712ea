"""YAML and JSON read from untrusted text with their size, depth and expansion bounded.

YAML aliases can make a few hundred bytes expand into gigabytes (each alias repeats an anchored
node, which may hold aliases itself); nesting can exhaust Python's stack. :func:`load_yaml`
counts the aliases and the nesting on the event stream (no recursion) and the expanded size on
the composed node graph (each anchored node counted once, multiplied by its uses) before anything
is constructed. :func:`load_json` turns a stack overflow into a one-line error and bounds depth.
Bounds: ``MAX_CONFIG_ALIASES``, ``MAX_CONFIG_DEPTH``, ``MAX_CONFIG_NODES``, ``MAX_JSON_DEPTH``
(:mod:`mispair.limits`).
"""

from __future__ import annotations

import json
import math
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from mispair.errors import ConfigError, DataError
from mispair.limits import limit, raise_hint
from mispair.safe_io import open_input

_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def load_yaml(text: str, where: object) -> Any:
    """The value of the YAML ``text`` (safe loader), refused with a :class:`ConfigError` naming
    ``where`` when it has too many aliases, is nested too deep or expands to too many values.

    Raises:
        yaml.YAMLError: the text is not valid YAML (the caller names the line).
    """
    _check_events(text, where)
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if node is not None:
        bound = limit("MAX_CONFIG_NODES")
        size = _expanded_size(node, {}, bound)
        if size > bound:
            raise ConfigError(
                f"{where}: expands to more than {bound:,} values (YAML aliases repeat "
                f"anchored parts; {raise_hint('MAX_CONFIG_NODES')})"
            )
    return yaml.safe_load(text)


def _check_events(text: str, where: object) -> None:
    aliases = depth = 0
    max_aliases, max_depth = limit("MAX_CONFIG_ALIASES"), limit("MAX_CONFIG_DEPTH")
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > max_aliases:  # anchors reused this often can expand exponentially
                raise ConfigError(
                    f"{where}: more than {max_aliases} YAML aliases ({raise_hint('MAX_CONFIG_ALIASES')})"
                )
        elif isinstance(event, _OPEN):
            depth += 1
            if depth > max_depth:
                raise ConfigError(
                    f"{where}: nested deeper than {max_depth} levels ({raise_hint('MAX_CONFIG_DEPTH')})"
                )
        elif isinstance(event, _CLOSE):
            depth -= 1


def _expanded_size(node: yaml.Node, memo: dict[int, int], bound: int) -> int:
    """Values ``node`` stands for once every alias is expanded (stops counting past ``bound``)."""
    if id(node) in memo:
        return memo[id(node)]
    size = 1
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        children = []
    for child in children:
        size += _expanded_size(child, memo, bound)
        if size > bound:
            break
    memo[id(node)] = size
    return size


def read_npz(path: Path, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The arrays ``keys`` of the ``.npz`` file ``path`` (never a pickled object); a damaged file,
    or one without those arrays, is a :class:`DataError` naming it and the way out."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            return {key: saved[key] for key in keys if key in saved.files or key == keys[0]}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(
            f"{path}: a damaged file of the run ({type(exc).__name__}); delete it, and "
            "mispair computes it again"
        ) from None


def load_json(text: str | bytes, where: object) -> Any:
    """The value of the JSON ``text``; a :class:`DataError` naming ``where`` when it is not JSON
    or is nested deeper than ``MAX_JSON_DEPTH``."""
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
        depth = limit("MAX_JSON_DEPTH") + 1
    except (ValueError, TypeError) as exc:
        raise DataError(f"{where}: not valid JSON ({exc})") from None
    else:
        depth = _depth(value)
    if depth > limit("MAX_JSON_DEPTH"):
        raise DataError(
            f"{where}: JSON nested deeper than {limit('MAX_JSON_DEPTH')} levels (a damaged "
            f"or hostile file; {raise_hint('MAX_JSON_DEPTH')})"
        )
    return value


def _depth(value: Any) -> int:
    """The nesting depth of lists and dicts in ``value``, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item)
    return deepest


def check_npy(path: str | Path, *, bounded: bool = True) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype a ``.npy`` file's header declares, checked before a value is read: a
    regular file (a FIFO or device refused without blocking), no object dtype, data no larger
    than the file holds and (``bounded``) than ``MAX_ARRAY_BYTES``; else a :class:`DataError`
    naming ``path``."""
    fd = open_input(path, 1 << 62, "a .npy array")
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            raise DataError(f"{path}: empty file, not a .npy array")
        try:
            version = np.lib.format.read_magic(handle)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
            else:
                shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
        except (ValueError, OSError, EOFError, SyntaxError) as exc:
            raise DataError(f"{path}: not a readable .npy array ({str(exc)[:200]})") from None
        data = os.fstat(handle.fileno()).st_size - handle.tell()
    if dtype.hasobject:
        raise DataError(f"{path}: a .npy array of Python objects, which mispair never loads")
    declared = math.prod(shape) * dtype.itemsize
    if bounded and declared > limit("MAX_ARRAY_BYTES"):
        raise DataError(
            f"{path}: a .npy array of {declared:,} bytes (shape {shape}), more than the "
            f"{limit('MAX_ARRAY_BYTES'):,} read at once ({raise_hint('MAX_ARRAY_BYTES')})"
        )
    if declared > data:
        raise DataError(
            f"{path}: a truncated .npy array (its header declares {declared:,} bytes, it holds {data:,})"
        )
    return shape, dtype


PARQUET_BATCH_ROWS = 65_536
"""Rows decoded at a time, each batch counted before the next (a dictionary-encoded column of a
few bytes on disk can decode to gigabytes)."""


def read_parquet_bounded(
    path: Path, what: str, *, links: bool = True, columns: Sequence[str] | None = None
) -> Any:
    """The Parquet table ``path`` as a DataFrame, never more than ``MAX_TABLE_ROWS`` rows (from
    the metadata, before a row is decoded) nor ``MAX_TABLE_DECODED_BYTES`` decoded (counted one
    batch of :data:`PARQUET_BATCH_ROWS` rows at a time), with unique column names (else a
    :class:`DataError` naming ``path``); ``columns``: only those of them the file has."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fd = open_input(path, limit("MAX_TABLE_BYTES"), what, hint=raise_hint("MAX_TABLE_BYTES"), links=links)
    with os.fdopen(fd, "rb") as handle:
        try:
            parquet = pq.ParquetFile(handle)
            check_rows(parquet.metadata.num_rows, path)
            names = parquet.schema_arrow.names
            if len(set(names)) != len(names):
                raise DataError(f"{path}: column names appear twice; a damaged or tampered file")
            bound, total, batches = limit("MAX_TABLE_DECODED_BYTES"), 0, []
            wanted = None if columns is None else [c for c in columns if c in names]
            schema = (
                parquet.schema_arrow
                if wanted is None
                else pa.schema([parquet.schema_arrow.field(c) for c in wanted])
            )
            for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=wanted):
                total += batch.nbytes
                if total > bound:
                    raise DataError(
                        f"{path}: more than {bound:,} bytes once decoded "
                        f"({raise_hint('MAX_TABLE_DECODED_BYTES')})"
                    )
                batches.append(batch)
            return pa.Table.from_batches(batches, schema=schema).to_pandas()
        except (OSError, ValueError, TypeError, pa.ArrowException) as exc:
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise DataError(f"{path}: not a readable Parquet file ({first})") from None


def check_rows(rows: int, where: object) -> None:
    """Refuse a table of more than ``MAX_TABLE_ROWS`` rows (read from its metadata or counted)."""
    if rows > limit("MAX_TABLE_ROWS"):
        raise DataError(
            f"{where}: {rows:,} rows, more than the {limit('MAX_TABLE_ROWS'):,} a table may hold "
            f"({raise_hint('MAX_TABLE_ROWS')})"
        )


TEXT_CHUNK_BYTES = 1 << 24
"""Bytes of a text file scanned at a time by :func:`check_text_lines`."""


def check_text_lines(data: bytes, where: object) -> int:
    """The lines of the text ``data`` (a CSV a person edits), once it is known to hold no NUL
    byte (a binary file, not text), at most ``MAX_TABLE_ROWS`` lines, none longer than
    ``MAX_LINE_CHARS`` bytes: each checked on the bytes, a chunk at a time, before a parser builds
    a value (a 450 MB file of NUL bytes was one field of 450 million characters to pandas).

    Raises:
        DataError: naming ``where``, the bound and how to raise it.
    """
    import numpy as np

    if b"\0" in data:
        raise DataError(f"{where}: not a text file (it holds NUL bytes); give the CSV file itself")
    lines = data.count(b"\n") + (not data.endswith(b"\n") and bool(data))
    check_rows(lines, where)
    bound, start = limit("MAX_LINE_CHARS"), 0  # the current line's first byte
    for offset in range(0, len(data), TEXT_CHUNK_BYTES):
        chunk = np.frombuffer(data, np.uint8, min(TEXT_CHUNK_BYTES, len(data) - offset), offset)
        ends = np.flatnonzero(chunk == 10) + offset
        starts = np.concatenate(([start], ends[:-1] + 1)) if len(ends) else np.array([start])
        longest = int((ends - starts[: len(ends)]).max()) if len(ends) else 0
        start = int(ends[-1]) + 1 if len(ends) else start
        if max(longest, offset + len(chunk) - start) > bound:
            raise DataError(
                f"{where}: a line of more than {bound:,} characters ({raise_hint('MAX_LINE_CHARS')})"
            )
    return lines


def check_json_elements(data: bytes | str, where: object) -> None:
    """Refuse JSON text of more than ``MAX_JSON_ELEMENTS`` values, counted on the text before it
    is parsed (each value costs tens of bytes once built: ``[0,0,...]`` grows ~27x)."""
    marks = (b",", b"[", b"{") if isinstance(data, bytes) else (",", "[", "{")
    count = sum(data.count(mark) for mark in marks)  # type: ignore[arg-type]
    if count > limit("MAX_JSON_ELEMENTS"):
        raise DataError(
            f"{where}: about {count:,} JSON values, more than the {limit('MAX_JSON_ELEMENTS'):,} "
            f"built at once ({raise_hint('MAX_JSON_ELEMENTS')})"
        )


def check_npz(path: str | Path) -> None:
    """Refuse, before anything is inflated, an ``.npz`` that is not a regular file or whose
    arrays declare more than ``MAX_ARRAY_BYTES`` each once unpacked (a cache file someone else
    may have written: a FIFO, a link to a device, a zip bomb)."""
    os.close(open_input(path, 1 << 62, "an .npz cache file"))
    bound = limit("MAX_ARRAY_BYTES")
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise DataError(f"{path}: not a readable .npz file ({exc}); delete it") from None
    for member in members:
        if member.file_size > bound:
            raise DataError(
                f"{path}: {member.filename} unpacks to {member.file_size:,} bytes, more than the "
                f"{bound:,} read at once ({raise_hint('MAX_ARRAY_BYTES')}); delete the file"
            )

"""Every bound mispair puts on an input, in one place, each raisable by an environment variable.

A limit is read with :func:`limit`; ``MISPAIR_LIMIT_<NAME>`` (e.g. ``MISPAIR_LIMIT_MAX_PIXELS=
100000000``) replaces its default for one run. ``docs/reliability.md`` lists every limit.

    >>> limit("MAX_TEXT_CHARS")
    1000
"""

from __future__ import annotations

import os

from mispair.errors import ConfigError

DEFAULTS: dict[str, int] = {
    # pictures: decoded by content through an allow-list, bounded before decoding
    "MAX_PIXELS": 20_000_000,  # of one raster picture, from its header
    "MAX_SVG_BYTES": 50_000_000,  # of an SVG after gzip decompression, nested images included
    "MAX_NESTED_IMAGES": 64,  # images embedded in one SVG (data: URIs, nested SVGs)
    "MAX_NESTED_PIXELS": 20_000_000,  # pixels of all rasters embedded in one SVG together
    "SVG_SECONDS": 30,  # time to render one SVG, checked at every embedded image
    # text: every caption of every reader
    "MAX_TEXT_CHARS": 1000,  # a longer caption is cut (with a warning naming the count)
    "MAX_TEXT_TOKENS": 1000,  # a pre-tokenized caption (NoW) is cut to this many tokens
    "MAX_LINE_CHARS": 10_000_000,  # one line of a text file that is not a caption (ids, JSON lines)
    # configs
    "MAX_CONFIG_BYTES": 1_000_000,  # a config file, checked before it is read
    "MAX_CONFIG_ALIASES": 50,  # YAML aliases in one config file
    "MAX_CONFIG_DEPTH": 32,  # nesting of mappings and lists in a config
    "MAX_CONFIG_NODES": 100_000,  # values in a config after alias expansion
    "MAX_OVERRIDES": 200,  # key=value overrides on one command line
    "MAX_OVERRIDE_CHARS": 10_000,  # one override
    # models
    "MAX_WEIGHT_ABS": 1_000_000,  # a checkpoint weight larger than this is a diverged or tampered run
    # collections: files refused before they are read
    "MAX_TABLE_BYTES": 2_000_000_000,  # a csv/tsv/jsonl/parquet table
    "MAX_COCO_JSON_BYTES": 1_000_000_000,  # a COCO or Karpathy captions JSON
    "MAX_MEMBER_BYTES": 50_000_000,  # one member of a WebDataset tar shard
    "MAX_TABLE_ROWS": 20_000_000,  # rows of a table (Parquet's from its metadata, before reading)
    "MAX_TABLE_DECODED_BYTES": 8_000_000_000,  # a Parquet table once decoded (read a row group at a time)
    "MAX_SHARD_MEMBERS": 1_000_000,  # members of one WebDataset tar shard
    "MAX_SHARD_DECODED_BYTES": 20_000_000_000,  # the members' declared sizes in one shard, summed
    "MAX_EXPANDED_NAMES": 100_000,  # shard names one brace pattern expands to
    "MAX_JSON_ELEMENTS": 30_000_000,  # values (objects, arrays, strings, numbers) of a captions JSON
    "MAX_ARRAY_BYTES": 2_000_000_000,  # one .npy array, from its header before it is read
    "MAX_IMAGE_BYTES": 50_000_000,  # one picture's bytes in a table cell (written to the cache)
    # JSON files a run folder or an index holds
    "MAX_JSON_DEPTH": 64,
    # an audit folder, a decisions file and an index folder: read as untrusted input
    "MAX_SUMMARY_BYTES": 50_000_000,  # an audit's summary.json
    "MAX_DECISIONS_BYTES": 500_000_000,  # a decisions.csv given to apply (and a labels file)
    # a person's answers: labels files, Label Studio exports, FiftyOne tags
    "MAX_ID_CHARS": 4096,  # a pair id or a reviewer's name in a labels file or an export
    "MAX_REVIEWERS": 1000,  # reviewers (labels files, annotators) merged at once
    "MAX_INDEX_FILE_BYTES": 50_000_000_000,  # one file of an index folder (when its manifest has no size)
}

RANGES: dict[str, tuple[int, int]] = {
    # every whole number a user gives on the command line or in an index, with its allowed range
    "nproc": (1, 64),
    "nlist": (1, 1_000_000),
    "nprobe": (1, 1_000_000),
    "m": (2, 256),  # HNSW links per vector (--hnsw-m)
    "ef_construction": (1, 100_000),
    "ef_search": (1, 100_000),
    "top_k": (1, 100_000),
    "rerank": (0, 100_000),
    "top": (0, 1_000_000),  # pairs in the audit's report (default: every pair)
    "folds": (1, 1000),
    "seed": (0, 2**32 - 1),
    "images": (1, 1_000_000_000),
    "captions_per_image": (1, 1000),
}

PREFIX = "MISPAIR_LIMIT_"


def limit(name: str) -> int:
    """The bound ``name`` (a key of :data:`DEFAULTS`), from ``MISPAIR_LIMIT_<name>`` when set.

    Raises:
        ConfigError: the environment variable is not a positive integer.
    """
    raw = os.environ.get(PREFIX + name)
    if raw is None:
        return DEFAULTS[name]
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"{PREFIX}{name}={raw!r}: expected a positive integer (default {DEFAULTS[name]})")
    return value


def raise_hint(name: str) -> str:
    """How a user raises the bound ``name``: ``"set MISPAIR_LIMIT_<name> to raise it"``."""
    return f"set {PREFIX}{name} to raise it"


def check_range(name: str, value: int, flag: str | None = None) -> int:
    """``value`` when it lies in ``RANGES[name]``, else a :class:`ConfigError` naming ``flag``
    (default ``--name``) and the range."""
    low, high = RANGES[name]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        flag = flag or "--" + name.replace("_", "-")
        raise ConfigError(f"{flag}: a whole number in [{low}, {high:,}], got {value!r}")
    return value


def range_text(name: str) -> str:
    """``RANGES[name]`` as help text: ``"1–64"``."""
    low, high = RANGES[name]
    return f"{low}–{high:,}"

"""Resolve a run's data section into train/dev/test PairSets through the reader registry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from mispair.config import DataConfig
from mispair.data.pairset import PairSet
from mispair.data.readers import READERS, detect_source, reader_of
from mispair.errors import ConfigError

DEFAULT_REAL_ROOT = Path("data/tuxpaint_precomp")
EMBEDDING_SOURCES = ("table", "folder")
"""The readers that read embedding columns (``data.image_embedding_column``, ...)."""


def resolve_source(data: DataConfig) -> DataConfig:
    """``data`` with ``source: auto`` resolved: the reader that recognises ``data.root``; without a
    root, the prepared Tux Paint set in ``data/tuxpaint_precomp`` when it exists (``mispair
    prepare tuxpaint``), else synthetic data. A root with the synthetic source is an error."""
    if data.source != "auto":
        READERS.get(data.source)
        if data.source == "synthetic" and data.root:
            raise ConfigError(
                f"data.root={data.root} with data.source=synthetic: synthetic data reads no "
                "folder; drop data.root, or set data.source=auto to read it"
            )
        if data.source != "synthetic" and not data.root:
            raise ConfigError(f"data.root: required for data.source={data.source}")
        return data
    if data.root:
        return replace(data, source=detect_source(data.root))
    if DEFAULT_REAL_ROOT.is_dir() and READERS.get("precomp")().detect(DEFAULT_REAL_ROOT):
        return replace(data, source="precomp", root=str(DEFAULT_REAL_ROOT))
    return replace(data, source="synthetic")


def concrete_source(data: DataConfig, log: Callable[[str], None] = print) -> DataConfig:
    """``data`` with ``source: auto`` made concrete (and its root absolute), so a checkpoint
    records what it was trained on and evaluating it from another folder reads the same data (or
    says it cannot); says so when ``auto`` falls back to synthetic data."""
    if data.source != "auto":
        return data
    resolved = resolve_source(data)
    if resolved.source == "synthetic":
        log(
            f"note: no prepared data in {DEFAULT_REAL_ROOT.resolve()}; training on synthetic data (run "
            "`mispair prepare tuxpaint` here, or give your collection: mispair train PATH)"
        )
        return resolved
    return replace(resolved, root=absolute_root(resolved.root))


def absolute_root(root: str | Path) -> str:
    """``root`` made absolute (a shard pattern's braces kept)."""
    root = Path(root)
    return str(root.resolve()) if "{" not in str(root) else str(root.parent.resolve() / root.name)


def load_split(data: DataConfig, split: str) -> PairSet:
    """One split of the configured source (with each caption's vector when ``data.caption_encoder``
    names a frozen encoder of captions)."""
    data = resolve_source(data)
    column = data.image_embedding_column or data.text_embedding_column
    if column and data.source not in EMBEDDING_SOURCES:
        raise ConfigError(
            f"embedding column {column!r}: vectors are read from a table file or a folder's "
            f"captions file, not from a {data.source} collection"
        )
    reader = reader_of(data)
    pairs = reader.read_split(data, split)
    if not data.caption_encoder:
        return pairs
    if pairs.text_features is not None:
        raise ConfigError(
            "data.caption_encoder and a text-embedding column: the captions' vectors are "
            "given twice; keep one"
        )
    from mispair.data.caption_encoders import caption_vectors

    vectors = caption_vectors(
        data.caption_encoder,
        data.caption_encoder_options,
        pairs.captions,
        reader.cache_dir(data),
        read_also=reader.old_cache_dirs(data),
    )
    return replace(pairs, text_features=vectors)

"""Resolve a run's data section into train/dev/test PairSets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from mispair.config import DataConfig
from mispair.data.pairset import PairSet
from mispair.data.precomp import read_precomp
from mispair.data.synthetic import make_synthetic
from mispair.errors import ConfigError

DEFAULT_REAL_ROOT = Path("data/tuxpaint_precomp")
SOURCES = ("auto", "synthetic", "precomp", "folder", "now")


def resolve_source(data: DataConfig) -> tuple[str, str | None]:
    """``(source, root)`` with ``auto`` resolved: the prepared Tux Paint set when it exists in
    ``data/tuxpaint_precomp`` (``mispair prepare tuxpaint``), else the synthetic fallback."""
    if data.source not in SOURCES:
        raise ConfigError(f"data.source: unknown source {data.source!r} (use one of {', '.join(SOURCES)})")
    if data.source != "auto":
        if data.source != "synthetic" and not data.root:
            raise ConfigError(f"data.root: required for data.source={data.source}")
        return data.source, data.root
    root = fallback_root(data)
    if (root / f"{data.train_split}_ims.npy").is_file():
        return "precomp", str(root)
    return "synthetic", None


def concrete_source(data: DataConfig, log: Callable[[str], None] = print) -> DataConfig:
    """``data`` with ``source: auto`` made concrete (and its root absolute), so a checkpoint
    records what it was trained on and evaluating it from another folder reads the same data (or
    says it cannot); says so when ``auto`` falls back to synthetic data."""
    if data.source != "auto":
        return data
    source, root = resolve_source(data)
    if source == "synthetic":
        log(f"note: no prepared data in {fallback_root(data).resolve()}; training on synthetic "
            "data (run `mispair prepare tuxpaint` in this folder, or set data.root)")  # fmt: skip
    return replace(data, source=source, root=str(Path(root).resolve()) if root else root)


def fallback_root(data: DataConfig) -> Path:
    """Where ``auto`` looks for prepared data: ``data.root``, else ``data/tuxpaint_precomp``
    (relative to the working directory, where ``mispair prepare`` writes it)."""
    return Path(data.root) if data.root else DEFAULT_REAL_ROOT


def load_split(data: DataConfig, split: str) -> PairSet:
    """One split of the configured source."""
    source, root = resolve_source(data)
    if source == "synthetic":
        sizes = {data.train_split: data.synthetic_images, data.dev_split: 100, data.test_split: 200}
        seeds = {data.train_split: 0, data.dev_split: 1, data.test_split: 2}
        if split not in sizes:
            raise ConfigError(f"synthetic data has splits {', '.join(sizes)}, not {split!r}")
        return make_synthetic(sizes[split], 5, seed=seeds[split])
    if source == "folder":
        from mispair.data.folder import read_folder

        return read_folder(root, split, allow_outside=data.folder_allow_outside)
    if source == "now":
        from mispair.data.now import read_now

        return read_now(root, split, data.now_tokenizer, vocab=data.vocab)
    return read_precomp(root, split)

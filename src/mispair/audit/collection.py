"""What ``mispair audit`` reads: the audit's run config over a collection in any form the readers
accept, and the picture files behind the image ids (for the report's thumbnails)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mispair.config import ROBUST_RUN, RunConfig, load_config
from mispair.data.loading import absolute_root, concrete_source
from mispair.errors import ConfigError

AUDIT_RUN: dict[str, Any] = {
    **ROBUST_RUN,
    "name": "audit",
    "division": {**ROBUST_RUN["division"], "rounds": 2, "nested_trust": True},
}
"""The audit's default run: :data:`~mispair.config.ROBUST_RUN`, the robust run of a user's
collection, with its division's two rounds under nested trust
(:mod:`~mispair.engine.held_out.nested`) instead of three plain rounds. Three plain rounds leak
(a fold's pairs score above its decoys, and at 70% mismatched the share read 0.06 low); nested
trust closes the leak at the same 45 scorers (docs/audit.md). ``mispair train`` keeps the three
plain rounds: its retriever trained on them reached 6.7 rSum more on Tux Paint (40% and 70%
swapped, seeds 0 and 1, every pair better)."""


def audit_config(
    root: Path,
    out: Path,
    *,
    config_path: str | None = None,
    overrides: Sequence[str] = (),
    plant: float | None = None,
    seed: int = 0,
) -> RunConfig:
    """The run the audit trains: :data:`AUDIT_RUN` (or the YAML at ``config_path``) with the
    ``overrides``, on the collection at ``root``, in ``out/run``; ``plant`` swaps that share of
    the training images' captions (the ``pmp`` protocol, recorded so the audit can score itself)."""
    config = load_config(config_path, list(overrides), default=AUDIT_RUN)
    config.data.root = absolute_root(root)
    config.data = concrete_source(config.data)
    if plant is not None:
        if not 0 < plant < 1:
            raise ConfigError(f"--plant: a share in (0, 1), got {plant}")
        config.data.noise.rate, config.data.noise.protocol, config.data.noise.seed = plant, "pmp", seed
        config.data.noise.file = None
    config.division.score_other_splits = True  # every pair of the collection gets a held-out score
    if config.division.scored_by == "in_sample":
        raise ConfigError(
            "division.scored_by: the audit ranks pairs by scores no model fitted "
            "(out_of_fold or early), not in_sample"
        )
    config.output = str(out / "run")
    return config


def picture_root(ids: Sequence[str], candidates: Sequence[Path], *, features: bool = False) -> Path | None:
    """The first folder of ``candidates`` that holds a picture file for every id (ids are paths
    relative to it, never leaving it; ``.npy`` features are not pictures unless ``features``:
    then any image file counts, what ``mispair apply`` links), or None. Ids that are all absolute
    paths (a DataFrame's pictures) are first tried below the deepest folder that holds them all."""
    if ids and all(Path(i).is_absolute() for i in ids):
        candidates = [Path(os.path.commonpath([str(Path(i).parent) for i in ids])), *candidates]
    for folder in candidates:
        base = folder.resolve()
        if base.is_dir() and all(
            _inside(base, i) and (base / i).is_file() and (features or not i.endswith(".npy")) for i in ids
        ):
            return base
    return None


def _inside(base: Path, image_id: str) -> bool:
    return (base / image_id).resolve().is_relative_to(base)

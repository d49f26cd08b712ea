"""Synthetic pairs for smoke runs and tests (``data.source: synthetic``; no ``data.root``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mispair.data.readers.base import READERS, Reader
from mispair.data.synthetic import make_synthetic
from mispair.errors import ConfigError

if TYPE_CHECKING:
    from mispair.config import DataConfig
    from mispair.data.pairset import PairSet

DEV_IMAGES, TEST_IMAGES = 100, 200


@READERS.register("synthetic")
class SyntheticReader(Reader):
    name = "synthetic"
    priority = 1000
    describes = "generated pairs (no files; for smoke runs)"

    def read_split(self, data: DataConfig, split: str) -> PairSet:
        sizes = {
            data.train_split: data.synthetic_images,
            data.dev_split: DEV_IMAGES,
            data.test_split: TEST_IMAGES,
        }
        seeds = {data.train_split: 0, data.dev_split: 1, data.test_split: 2}
        if split not in sizes:
            raise ConfigError(f"synthetic data has splits {', '.join(sizes)}, not {split!r}")
        return make_synthetic(sizes[split], 5, seed=seeds[split])

    def picture_dirs(self, data: DataConfig) -> list[Path]:
        return []

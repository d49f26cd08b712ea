"""The precomputed-feature format of the papers (``f30k_precomp``, ``coco_precomp``,
``cc152k_precomp``; see :mod:`mispair.data.precomp`), which ``mispair prepare`` also writes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mispair.data.cache_folder import collection_cache
from mispair.data.precomp import available_splits, read_natural_noise, read_precomp
from mispair.data.readers.base import READERS, Reader

if TYPE_CHECKING:
    import numpy as np

    from mispair.config import DataConfig
    from mispair.data.pairset import PairSet

STANDARD_SPLITS = ("train", "dev", "test")
PICTURE_DIRS = (Path("/usr/share/tuxpaint/stamps"), Path("/usr/share/openclipart/png"))
"""Where the pictures of the prepared Tux Paint and OpenClipart sets lie (their Debian packages)."""


@READERS.register("precomp")
class PrecomputedReader(Reader):
    name = "precomp"
    priority = 10
    describes = "a precomputed-feature folder ({split}_ims.npy + {split}_caps.txt), as the papers ship"

    def detect(self, path: Path) -> bool:
        return path.is_dir() and any(
            (path / f"{s}_caps.txt").is_file() or (path / f"{s}_caps.tsv").is_file()
            for s in available_splits(path)
        )

    def splits(self, data: DataConfig) -> list[str]:
        present = available_splits(data.root)
        return [s for s in STANDARD_SPLITS if s in present] or present

    def read_split(self, data: DataConfig, split: str) -> PairSet:
        return read_precomp(data.root, split)

    def cache_dir(self, data: DataConfig) -> Path:
        return collection_cache(data)

    def old_cache_dirs(self, data: DataConfig) -> list[Path]:
        return []  # ``ROOT/cache`` is prepare's own (image features): its entries are not read

    def picture_dirs(self, data: DataConfig) -> list[Path]:
        return [Path(data.root), *PICTURE_DIRS]

    def natural_noise(self, data: DataConfig) -> np.ndarray | None:
        return read_natural_noise(data.root, data.train_split)

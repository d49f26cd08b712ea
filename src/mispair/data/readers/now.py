"""The NoW benchmark's precomputed folders (``now100k_precomp``, ``h5100k_precomp``: image
features and pre-tokenized captions; see :mod:`mispair.data.now`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mispair.data.now import read_now
from mispair.data.readers.base import READERS
from mispair.data.readers.precomputed import PrecomputedReader

if TYPE_CHECKING:
    from mispair.config import DataConfig
    from mispair.data.pairset import PairSet


@READERS.register("now")
class NowReader(PrecomputedReader):
    name = "now"
    priority = 5
    describes = "a NoW folder ({split}_ims.npy + {split}_caps_{tokenizer}.txt and a vocabulary)"

    def detect(self, path: Path) -> bool:
        return path.is_dir() and any(path.glob("*_caps_*.txt")) and any(path.glob("*_ims.npy"))

    def read_split(self, data: DataConfig, split: str) -> PairSet:
        return read_now(data.root, split, data.now_tokenizer, vocab=data.vocab)

    def picture_dirs(self, data: DataConfig) -> list[Path]:
        return [Path(data.root)]

    def natural_noise(self, data: DataConfig) -> None:
        return None

"""The collection an index covers: every image and caption of some splits of a folder or
precomputed dataset, numbered globally (split after split), with a fingerprint."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from mispair.config import DataConfig
from mispair.data.loading import load_split, resolve_source
from mispair.data.mapped import rows as read_rows
from mispair.data.pairset import PairSet
from mispair.data.readers import reader_of
from mispair.errors import DataError

FINGERPRINT_ROWS = 64
"""Feature rows per split that enter the fingerprint (evenly spaced, first and last included)."""


@dataclass
class Collection:
    """Splits of one dataset, as read by :func:`mispair.data.loading.load_split`.

    Image ``i`` of the collection is image ``i - image_offsets[p]`` of ``parts[p]``; captions are
    numbered the same way. Precomputed features stay memory-mapped.
    """

    data: DataConfig
    splits: list[str]
    parts: list[PairSet]

    @property
    def root(self) -> Path:
        return Path(str(self.data.root))

    @property
    def n_images(self) -> int:
        return sum(p.n_images for p in self.parts)

    @property
    def n_captions(self) -> int:
        return sum(p.n_captions for p in self.parts)

    @cached_property
    def image_offsets(self) -> np.ndarray:
        """``[n_parts + 1]`` the global number of each part's first image (and the total)."""
        return np.cumsum([0] + [p.n_images for p in self.parts])

    @cached_property
    def image_of_caption(self) -> np.ndarray:
        """``[n_captions]`` int64, the (global) image each caption was written for."""
        return np.concatenate([p.image_of_caption + o for p, o in zip(self.parts, self.image_offsets)])

    @property
    def captions(self) -> list[str]:
        return [c for p in self.parts for c in p.captions]

    def image_ids(self) -> list[str]:
        """An identifier per image: the dataset's (file name, id), else ``split:number``."""
        return [
            name
            for split, p in zip(self.splits, self.parts)
            for name in (p.image_ids or [f"{split}:{i}" for i in range(p.n_images)])
        ]

    def image_splits(self) -> list[str]:
        return [split for split, p in zip(self.splits, self.parts) for _ in range(p.n_images)]

    def image_features(self, images: np.ndarray) -> np.ndarray:
        """``[len(images), n_fragments, dim]`` float32 features of the (global) ``images``."""
        images = np.asarray(images, dtype=np.int64)
        part = np.searchsorted(self.image_offsets, images, side="right") - 1
        out = np.empty((len(images), *self.parts[0].images.shape[1:]), dtype=np.float32)
        for p in np.unique(part):
            rows = np.flatnonzero(part == p)
            local = images[rows] - self.image_offsets[p]
            order = np.argsort(local)  # a memory map reads increasing rows fastest
            out[rows[order]] = read_rows(self.parts[p].images, local[order])
        return out

    def fingerprint(self) -> str:
        """A digest of the splits' names, captions, image ids, caption-to-image layout, feature
        shapes and :data:`FINGERPRINT_ROWS` feature rows per split: another collection, or this one
        with a caption, an image or its order changed, has another fingerprint. The folder's path
        is not part of it (a moved copy matches)."""
        digest = hashlib.blake2b(digest_size=16)
        for split, part in zip(self.splits, self.parts):
            layout = {
                "split": split,
                "shape": list(part.images.shape),
                "captions": part.captions,
                "image_ids": part.image_ids,
            }
            digest.update(json.dumps(layout, ensure_ascii=False).encode("utf-8"))
            digest.update(part.image_of_caption.astype("<i8").tobytes())
            rows = np.unique(np.linspace(0, part.n_images - 1, FINGERPRINT_ROWS).round().astype(np.int64))
            digest.update(np.ascontiguousarray(part.images[rows], dtype="<f4").tobytes())
        return digest.hexdigest()


def open_collection(
    root: str | Path, split: str = "all", options: dict[str, Any] | None = None
) -> Collection:
    """The splits ``split`` (a name, names separated by commas, or ``all``: every split present)
    of the collection at ``root``, in any form the readers accept (``options``: more
    :class:`~mispair.config.DataConfig` fields, e.g. ``image_column``)."""
    data = resolve_source(DataConfig(root=str(root), **(options or {})))
    data.root = str(Path(data.root).resolve())
    splits = _split_names(reader_of(data).splits(data), split)
    return Collection(data, splits, [load_split(data, s) for s in splits])


def _split_names(present: list[str], split: str) -> list[str]:
    if split == "all":
        return present
    names = [s.strip() for s in split.split(",") if s.strip()]
    if not names or len(set(names)) < len(names):
        raise DataError(f"--split {split!r}: give split names separated by commas, each once, or all")
    return names

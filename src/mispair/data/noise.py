"""Synthetic mismatch injection: the two noise protocols of the papers, recorded for scoring."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mispair.atomic import atomic_write
from mispair.config import DataConfig
from mispair.data.loading import resolve_source
from mispair.data.pairset import PairSet, caption_groups
from mispair.data.precomp import load_npy
from mispair.data.readers import reader_of
from mispair.errors import DataError

PROTOCOLS = ("ncr", "pmp")


@dataclass(frozen=True)
class NoiseRecord:
    """Which image every caption is paired with after noise injection, and whether it is wrong.

    Attributes:
        image_of_caption: ``[n_captions]`` int, the image each caption is now paired with.
        true_image: ``[n_captions]`` int, the image each caption was written for.
        is_noisy: ``[n_captions]`` bool, True where the pair is truly mismatched (a shuffled caption
            that lands back on its own image, or on an image with an identical caption, is clean).
    """

    image_of_caption: np.ndarray
    true_image: np.ndarray
    is_noisy: np.ndarray

    @property
    def noise_rate(self) -> float:
        """The fraction of captions whose pair is truly mismatched."""
        return float(self.is_noisy.mean()) if len(self.is_noisy) else 0.0

    def save(self, path: str | Path) -> None:
        """Write a ``[3, n_captions]`` int64 ``.npy`` (paired image, true image, noisy flag),
        atomically."""
        path = Path(path)
        table = np.stack([self.image_of_caption, self.true_image, self.is_noisy.astype(np.int64)])
        atomic_write(path, lambda f: np.save(f, table.astype(np.int64)))

    @classmethod
    def load(cls, path: str | Path) -> NoiseRecord:
        """Read a record written by :meth:`save`."""
        table = _load_int_array(path)
        if table.ndim != 2 or table.shape[0] != 3:
            raise DataError(
                f"{path}: not a mispair noise record (a [3, n_captions] array); for a reference "
                "repository's noise index use NoiseRecord.from_reference"
            )
        return cls(table[0], table[1], table[2].astype(bool))

    @classmethod
    def from_reference(cls, path: str | Path, n_images: int, captions_per_image: int) -> NoiseRecord:
        """Read a noise-index file published by a reference repository.

        - ``n_images × captions_per_image`` entries (NCR / PC² style): the image each caption is
          paired with;
        - ``n_images`` entries (RCL style, per image): the captions of image ``i`` are paired with
          image ``index[i]``.
        """
        index = _load_int_array(path)
        n_captions = n_images * captions_per_image
        true_image = np.arange(n_captions) // captions_per_image
        if index.ndim == 1 and len(index) == n_captions:
            paired = index
        elif index.ndim == 1 and len(index) == n_images:
            paired = index[true_image]
        else:
            raise DataError(
                f"{path}: {index.shape} entries fit neither {n_captions} captions nor {n_images} images"
            )
        if paired.min(initial=0) < 0 or paired.max(initial=0) >= n_images:
            raise DataError(f"{path}: image indices outside [0, {n_images})")
        return cls(paired, true_image, paired != true_image)


def inject_noise(
    n_images: int,
    captions_per_image: int,
    rate: float,
    protocol: str = "pmp",
    seed: int = 0,
    *,
    caption_groups: np.ndarray | None = None,
    image_of_caption: np.ndarray | None = None,
) -> NoiseRecord:
    """Mismatch a ``rate`` fraction of the pairs, deterministically by ``seed``.

    Caption ``k`` is assumed written for image ``k // captions_per_image``, unless
    ``image_of_caption [n_captions]`` says which (any number of captions per image; then
    ``n_images`` and ``captions_per_image`` are not read).

    - ``"ncr"`` (per caption; NCR, PC², BiCro): ``round(rate · n_captions)`` captions are chosen and
      their image indices shuffled among themselves.
    - ``"pmp"`` (per image; RCL, DECL, L2RM): ``round(rate · n_images)`` images are chosen and
      permuted among themselves, so all captions of a chosen image move together.

    Args:
        caption_groups: optional ``[n_captions]`` int labels of identical caption texts; a caption
            moved onto an image that has a caption of the same group is not counted as noisy.

    Example:
        >>> record = inject_noise(100, 5, 0.4, "pmp", seed=0)
        >>> record.image_of_caption.shape, round(record.noise_rate, 1)
        ((500,), 0.4)
    """
    if protocol not in PROTOCOLS:
        raise DataError(f"unknown noise protocol {protocol!r} (use one of {', '.join(PROTOCOLS)})")
    if not 0.0 <= rate <= 1.0:
        raise DataError(f"noise rate must be in [0, 1], got {rate}")
    if image_of_caption is not None:
        true_image = np.asarray(image_of_caption, dtype=np.int64)
        n_images = int(true_image.max(initial=-1)) + 1
    elif n_images < 1 or captions_per_image < 1:
        raise DataError("noise injection needs at least one image and one caption per image")
    else:
        true_image = np.arange(n_images * captions_per_image) // captions_per_image
    rng = np.random.default_rng(seed)
    n_captions = len(true_image)
    if protocol == "ncr":
        chosen = rng.choice(n_captions, size=round(rate * n_captions), replace=False)
        paired = true_image.copy()
        paired[chosen] = true_image[rng.permutation(chosen)]
    else:
        chosen = rng.choice(n_images, size=round(rate * n_images), replace=False)
        new_image = np.arange(n_images)
        new_image[chosen] = rng.permutation(chosen)
        paired = new_image[true_image]
    return NoiseRecord(paired, true_image, _mismatched(paired, true_image, caption_groups))


def noise_of_split(data: DataConfig, train: PairSet) -> NoiseRecord | None:
    """The noise of a run's training split: ``data.noise.file`` (a saved record, or a reference
    repository's index), injected synthetic noise (``data.noise.rate > 0``), or, for a
    precomputed collection with natural-noise labels (OpenClipart), those labels (pairs unchanged,
    scored only); None when the split is taken as clean."""
    per_image = train.captions_per_image
    if data.noise.file:
        return _noise_file(Path(data.noise.file), train)
    if data.noise.rate <= 0:
        return _natural_noise(data, train)
    layout = None if per_image is not None else train.image_of_caption  # any number of captions per image
    return inject_noise(
        train.n_images,
        per_image or 1,
        data.noise.rate,
        data.noise.protocol,
        data.noise.seed,
        caption_groups=caption_groups(train.captions),
        image_of_caption=layout,
    )


def _noise_file(path: Path, train: PairSet) -> NoiseRecord:
    try:
        record = NoiseRecord.load(path)
    except DataError:
        if train.captions_per_image is None:
            raise
        record = NoiseRecord.from_reference(path, train.n_images, train.captions_per_image)
    if len(record.image_of_caption) != train.n_captions:
        raise DataError(
            f"{path}: noise for {len(record.image_of_caption)} captions, "
            f"training split has {train.n_captions}"
        )
    for name, images in (("paired", record.image_of_caption), ("true", record.true_image)):
        if images.min(initial=0) < 0 or images.max(initial=0) >= train.n_images:
            raise DataError(
                f"{path}: {name} image indices outside [0, {train.n_images}) of the training split"
            )
    return record


def _natural_noise(data: DataConfig, train: PairSet) -> NoiseRecord | None:
    data = resolve_source(data)
    labels = reader_of(data).natural_noise(data)
    if labels is None:
        return None
    if len(labels) != train.n_captions:
        raise DataError(
            f"{data.root}/{data.train_split}_natural_noise.npy: {len(labels)} labels for "
            f"{train.n_captions} captions"
        )
    return NoiseRecord(train.image_of_caption, train.image_of_caption, labels)


def _mismatched(paired: np.ndarray, true_image: np.ndarray, caption_groups: np.ndarray | None) -> np.ndarray:
    noisy = paired != true_image
    if caption_groups is None:
        return noisy
    caption_groups = np.asarray(caption_groups)
    if caption_groups.shape != paired.shape:
        raise DataError(f"caption_groups needs {len(paired)} entries, got {caption_groups.shape}")
    groups_of_image: dict[int, set] = {}
    for image, group in zip(true_image.tolist(), caption_groups.tolist()):
        groups_of_image.setdefault(image, set()).add(group)
    for k in np.flatnonzero(noisy):
        if caption_groups[k] in groups_of_image[int(paired[k])]:
            noisy[k] = False
    return noisy


def _load_int_array(path: str | Path) -> np.ndarray:
    array = load_npy(path)
    if not np.issubdtype(array.dtype, np.integer):
        raise DataError(f"{path}: expected integer image indices, got dtype {array.dtype}")
    return array.astype(np.int64)

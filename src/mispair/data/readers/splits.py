"""Splits of a collection by image: the split column where given, a seeded carve where not.

All captions of one image share its split (an image is never in two). Without a split column the
images are carved deterministically (seed 0): 10% test (at most 1,000), 5% dev (at most 500), the
rest train. With one, a split the column never names (dev or test) is carved the same way from
the training images, and a note says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mispair.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

TEST_DIVISOR, TEST_MAX = 10, 1000  # 10% test, at most 1,000 images
DEV_DIVISOR, DEV_MAX = 20, 500  # 5% dev, at most 500 images


def assign_splits(pairs: pd.DataFrame, where: str) -> tuple[pd.Series, str | None]:
    """Each pair's split (``train``/``dev``/``test``) and a note when some were carved."""
    given = pairs["split"]
    if not given.astype(bool).any():
        split_of = carve(sorted(set(pairs["image"])), dev=True, test=True)
        note = (
            f"no split column: {_count(split_of, 'test')} images set aside as test and "
            f"{_count(split_of, 'dev')} as dev (seeded); every pair is still audited"
        )
        return pairs["image"].map(split_of), note
    if not given.astype(bool).all():
        row = pairs[~given.astype(bool)].iloc[0]
        raise DataError(
            f"{where}: pair {row['pair_id']} has no split while others have one (give every "
            "row a split, or none)"
        )
    split_of = dict(zip(pairs["image"], given))
    conflicting = pairs[pairs["image"].map(split_of) != given]
    if len(conflicting):
        row = conflicting.iloc[0]
        raise DataError(
            f"{where}: image {row['image']!r} is in two splits (pair {row['pair_id']} says "
            f"{row['split']!r}); an image's captions share one split"
        )
    missing = [s for s in ("dev", "test") if s not in set(split_of.values())]
    if not missing:
        return given, None
    train = sorted(image for image, split in split_of.items() if split == "train")
    carved = carve(train, dev="dev" in missing, test="test" in missing)
    split_of.update(carved)
    note = (
        f"the split column names no {' or '.join(missing)} pairs: "
        + ", ".join(f"{_count(carved, s)} training images set aside as {s}" for s in missing)
        + " (seeded)"
    )
    return pairs["image"].map(split_of), note


def carve(images: list[str], *, dev: bool, test: bool) -> dict[str, str]:
    """``images`` (sorted) dealt into test, dev and train by a seed-0 permutation."""
    order = np.random.default_rng(0).permutation(len(images))
    n_test = min(TEST_MAX, len(images) // TEST_DIVISOR) if test else 0
    n_dev = min(DEV_MAX, len(images) // DEV_DIVISOR) if dev else 0
    split_of = {}
    for rank, i in enumerate(order):
        split_of[images[i]] = "test" if rank < n_test else "dev" if rank < n_test + n_dev else "train"
    return split_of


def _count(split_of: dict[str, str], split: str) -> int:
    return sum(value == split for value in split_of.values())

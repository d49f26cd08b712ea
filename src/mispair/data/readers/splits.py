"""Splits of a collection by image: the split column where given, a carve by content where not.

All captions of one image share its split (an image is never in two). Without a split column the
images are carved deterministically from their content: 10% test (at most 1,000), 5% dev (at
most 500), the rest train, the pictures taken in the order of a digest of their content (their
features), so the same pictures are carved alike whatever their names, their form or the rows'
order, and the copies of one picture share a split. With a split column, a split it never names
(dev or test) is carved the same way from the training images, and a note says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mispair.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

TEST_DIVISOR, TEST_MAX = 10, 1000  # 10% test, at most 1,000 images
DEV_DIVISOR, DEV_MAX = 20, 500  # 5% dev, at most 500 images


def assign_splits(
    pairs: pd.DataFrame, where: str, content: Mapping[str, str] | None = None
) -> tuple[pd.Series, str | None]:
    """Each pair's split (``train``/``dev``/``test``) and a note when some were carved;
    ``content``: each image's content key (:func:`carve`; default its name)."""
    given = pairs["split"]
    if not given.astype(bool).any():
        split_of = carve(sorted(set(pairs["image"])), dev=True, test=True, content=content)
        note = (
            f"no split column: {_count(split_of, 'test')} images set aside as test and "
            f"{_count(split_of, 'dev')} as dev (by their content); every pair is still audited"
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
    carved = carve(train, dev="dev" in missing, test="test" in missing, content=content)
    split_of.update(carved)
    note = (
        f"the split column names no {' or '.join(missing)} pairs: "
        + ", ".join(f"{_count(carved, s)} training images set aside as {s}" for s in missing)
        + " (by their content)"
    )
    return pairs["image"].map(split_of), note


def carve(
    images: list[str], *, dev: bool, test: bool, content: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``images`` dealt into test, dev and train by their content: the distinct content keys
    (``content[image]``; default the image's name) taken in the order of a digest of each, the
    first 10% (at most 1,000) to test, the next 5% (at most 500) to dev; an image goes where its
    content goes (the copies of one picture share a split)."""
    key_of = {image: image for image in images} if content is None else content
    keys = sorted({key_of[image] for image in images}, key=_carve_rank)
    n_test = min(TEST_MAX, len(keys) // TEST_DIVISOR) if test else 0
    n_dev = min(DEV_MAX, len(keys) // DEV_DIVISOR) if dev else 0
    split_of_key = {
        key: "test" if rank < n_test else "dev" if rank < n_test + n_dev else "train"
        for rank, key in enumerate(keys)
    }
    return {image: split_of_key[key_of[image]] for image in images}


def _carve_rank(key: str) -> tuple[bytes, str]:
    """Where a content key comes in the carve: a digest of it (then the key, for equal digests)."""
    return hashlib.blake2b(f"split:{key}".encode(), digest_size=8).digest(), key


def _count(split_of: dict[str, str], split: str) -> int:
    return sum(value == split for value in split_of.values())

"""A collection as a table of pairs, and what every table-shaped reader shares.

Every form that lists pairs (a folder's captions file, a table file, WebDataset shards, COCO JSON)
is read into a :class:`CollectionTable`: one row per input pair with its ``pair_id`` (the id
column, else the input row), the ``image`` (a path relative to the table's image folder), the
``caption`` and the ``split`` ("" when not given). Rows that cannot be used are *refused* with a
reason, never dropped silently: an empty caption or image, a remote URL, a path outside the
folder, a missing file, a file that is not a picture, an unknown split. More than half of the
rows refused is an error.

:class:`TableReader` turns such a table into splits: the image features of every picture are
extracted once (EfficientNet-Lite0, cached in the user's cache folder,
:mod:`mispair.data.cache_folder`; the collection is only read), the images are assigned to
splits (the split column, else a carve of 10% test and 5% dev by the pictures' content), and each
split becomes a :class:`~mispair.data.pairset.PairSet` whose ``pair_ids`` are the table's, in an
order of their content (:func:`content_order`): the same pairs kept in another form or another row
order are the same arrays, so every seeded step after the reader (folds, batches, decoys, the
calibration's resamples) gives them the same numbers.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mispair.data.cache_folder import collection_cache, shipped
from mispair.data.pairset import PairSet
from mispair.data.picture_store import PictureFeatures
from mispair.data.readers.base import Reader
from mispair.data.readers.columns import columns_of
from mispair.data.text_bounds import cut_long_texts
from mispair.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

    from mispair.config import DataConfig

"""Captions are cut to this many characters: work per caption stays bounded for any input."""
SPLIT_NAMES = {
    "train": "train",
    "dev": "dev",
    "val": "dev",
    "valid": "dev",
    "validation": "dev",
    "restval": "train",
    "test": "test",
}
"""Split values accepted in a split column (Karpathy's ``val``/``restval`` included)."""
REMOTE = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
CACHE_FOLDER = ".mispair_cache"
"""The cache an older mispair kept beside a table (still read, never written)."""


@dataclass
class CollectionTable:
    """The pairs of a collection as read from its files.

    Attributes:
        pairs: one row per accepted pair: ``pair_id``, ``image`` (relative to ``image_root``),
            ``caption``, ``split`` (``train``/``dev``/``test``, or "" when not given); for
            unpacked pictures also ``image_name``, what the row itself calls its picture (a file
            of ``image_root`` too), where rows holding the same bytes name them otherwise.
        refused: the refused rows: ``pair_id``, ``image``, ``caption``, ``reason``.
        image_root: the folder the image paths are relative to.
        where: the file or folder read, for messages.
        trusted_paths: the image paths were written by mispair (unpacked bytes), so they are not
            checked to lie inside ``image_root``.
    """

    pairs: pd.DataFrame
    refused: pd.DataFrame
    image_root: Path
    where: str
    trusted_paths: bool = False

    @property
    def rows(self) -> int:
        """Rows read, accepted or refused."""
        return len(self.pairs) + len(self.refused)


def refusal_frame(rows: list[dict]) -> pd.DataFrame:
    """Refused rows as a table (``pair_id``, ``image``, ``caption``, ``reason``)."""
    import pandas as pd

    return pd.DataFrame(rows, columns=["pair_id", "image", "caption", "reason"])


def checked_table(
    frame: pd.DataFrame,
    image_root: Path,
    where: str,
    *,
    trusted_paths: bool = False,
    refused: list[dict] | None = None,
) -> CollectionTable:
    """A :class:`CollectionTable` from ``frame`` (columns ``pair_id``, ``image``, ``caption``,
    ``split``, all strings): captions cut to ``MAX_TEXT_CHARS`` (:mod:`mispair.limits`), split names mapped
    (:data:`SPLIT_NAMES`), unusable rows refused (``refused``: rows the reader already refused)."""
    ids = frame["pair_id"]
    if ids.duplicated().any():
        raise DataError(
            f"{where}: pair id {ids[ids.duplicated()].iloc[0]!r} appears twice; ids must be "
            "unique (name another column with --id-column, or none to use row numbers)"
        )
    frame = frame.assign(
        caption=frame["caption"].str.strip(),
        image=frame["image"].str.strip(),
        split=frame["split"].str.strip().str.lower(),
        **({"image_name": frame["image_name"].str.strip()} if "image_name" in frame else {}),
    )
    frame["caption"] = cut_long_texts(frame["caption"].tolist(), where)
    problem = _id_problem if "image_embedding" in frame else _row_problem
    reason = frame.apply(problem, axis=1, result_type="reduce") if len(frame) else frame["image"]
    bad = reason.astype(bool)
    refused_rows = list(refused or []) + [
        {"pair_id": r.pair_id, "image": r.image, "caption": r.caption, "reason": why}
        for r, why in zip(frame[bad].itertuples(), reason[bad])
    ]
    accepted = frame[~bad].assign(split=lambda f: f["split"].map(lambda s: SPLIT_NAMES.get(s, "")))
    return CollectionTable(
        accepted.reset_index(drop=True), refusal_frame(refused_rows), image_root, where, trusted_paths
    )


def _row_problem(row) -> str:
    if not row["image"]:
        return "no image"
    if not row["caption"]:
        return "empty caption"
    if REMOTE.match(row["image"]):
        return "a remote URL is not fetched: download the images first (e.g. with img2dataset)"
    if "\x00" in row["image"]:
        return "a NUL character in the image path"
    if _too_long(row["image"]):
        return "an image path longer than the file system allows (4096 bytes, 255 per name)"
    if row["split"] and row["split"] not in SPLIT_NAMES:
        return f"unknown split {row['split']!r} (use train, dev or test)"
    return ""


def _id_problem(row) -> str:
    """What makes a row unusable when its image is given as a vector (the image is an id only)."""
    if not row["caption"]:
        return "empty caption"
    if row["split"] and row["split"] not in SPLIT_NAMES:
        return f"unknown split {row['split']!r} (use train, dev or test)"
    return ""


def check_refusals(table: CollectionTable, *, warn: bool = True) -> None:
    """More than half of the rows refused: the input is probably not what it seems (an error
    naming the most common reason); fewer: one warning saying so (a row is never dropped without
    a word)."""
    if not table.rows or not len(table.refused):
        return
    reasons = table.refused["reason"].value_counts()
    first = table.refused[table.refused["reason"] == reasons.index[0]].iloc[0]
    line = (
        f"{table.where}: {len(table.refused)} of {table.rows} rows refused, most for: "
        f"{reasons.index[0]} (e.g. pair {first['pair_id']}: {first['image']!r})"
    )
    if len(table.refused) * 2 > table.rows:
        raise DataError(line)
    if warn:
        warnings.warn(f"{line}; the other rows are used", stacklevel=2)


@dataclass
class PreparedCollection:
    """A table with every image's features and every pair's split; ``digests``: each image's
    content digest (:func:`~mispair.data.content.stored_digests` of its features), by image."""

    table: CollectionTable
    features: np.ndarray  # [n_images, n_fragments, dim]
    image_index: dict[str, int]
    split_note: str | None
    digests: dict[str, str]


class TableReader(Reader):
    """A reader of a form that lists pairs; subclasses implement :meth:`table`."""

    def table(self, data: DataConfig) -> CollectionTable:
        """The collection's pairs as read from its files (rows refused with reasons)."""
        raise NotImplementedError

    def stamp(self, data: DataConfig) -> tuple:
        """What identifies the input's current state (files, sizes, times): equal stamps, equal
        tables within one process."""
        path = Path(data.root)
        files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
        return tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)

    def cache_dir(self, data: DataConfig) -> Path:
        return collection_cache(data)

    def old_cache_dirs(self, data: DataConfig) -> list[Path]:
        if data.cache_dir:
            return []
        root = Path(data.root)
        return shipped((root if root.is_dir() else root.parent) / CACHE_FOLDER)

    def picture_dirs(self, data: DataConfig) -> list[Path]:
        return [self.prepared(data).table.image_root]

    def splits(self, data: DataConfig) -> list[str]:
        present = set(self.prepared(data).table.pairs["split"])
        return [s for s in (data.train_split, data.dev_split, data.test_split) if s in present]

    def refused(self, data: DataConfig) -> pd.DataFrame:
        return self.prepared(data).table.refused

    def split_note(self, data: DataConfig) -> str | None:
        return self.prepared(data).split_note

    def read_split(self, data: DataConfig, split: str) -> PairSet:
        """The split's pairs in the order of their content (:func:`content_order`); a test split
        cut into ``data.test_folds`` > 1 folds keeps the table's order (COCO's 5-fold 1K test is
        the file's consecutive images), each image's pairs together."""
        prepared = self.prepared(data)
        table = prepared.table
        rows = table.pairs[table.pairs["split"] == split]
        if rows.empty:
            raise DataError(f"{table.where}: no pairs in split {split!r}")
        if split == data.test_split and data.test_folds > 1:
            first = {image: i for i, image in enumerate(dict.fromkeys(rows["image"]))}
            rows = rows.iloc[np.argsort(rows["image"].map(first).to_numpy(), kind="stable")]
        else:
            rows = rows.iloc[content_order(rows, prepared.digests)]
        images = list(dict.fromkeys(rows["image"]))
        local = {image: i for i, image in enumerate(images)}
        return PairSet(
            images=prepared.features[[prepared.image_index[i] for i in images]],
            captions=rows["caption"].tolist(),
            image_of_caption=np.array([local[i] for i in rows["image"]]),
            name=f"{Path(data.root).name}/{split}",
            image_ids=images,
            pair_ids=rows["pair_id"].tolist(),
            caption_image_names=_own_names(rows),
            text_features=np.stack(rows["text_embedding"].tolist()) if "text_embedding" in rows else None,
        )

    def prepared(self, data: DataConfig) -> PreparedCollection:
        """The table with features and splits, computed once per input state in a process."""
        key = (
            self.name,
            str(Path(data.root).resolve()),
            columns_of(data),
            data.image_encoder,
            repr(sorted(data.image_encoder_options.items())),
            data.image_form,
            data.image_root,
            data.folder_allow_outside,
            str(self.cache_dir(data)),
            self.stamp(data),
        )
        if _PREPARED.get("key") != key:
            _PREPARED.clear()
            table, old = self.table(data), self.old_cache_dirs(data)
            _PREPARED.update(key=key, value=prepare(table, data, old))
        return _PREPARED["value"]


def content_order(rows: pd.DataFrame, digests: dict[str, str]) -> np.ndarray:
    """The order of ``rows`` (``image``, ``caption``, ``pair_id``) by content: by their image's
    content digest (``digests``; two pictures alike to the encoder also by their captions), then
    the caption; the image's name and the pair id order only what content leaves equal (the same
    picture with the same captions twice, a pair given twice). An image's pairs come together,
    and the same pairs in any form or row order come in the same order."""
    import pandas as pd

    digest = rows["image"].map(digests)
    shared = digest[digest.map(rows.drop_duplicates("image").groupby(digest)["image"].size()) > 1]
    alike = rows.loc[shared.index].groupby("image")["caption"].agg(lambda c: "\n".join(sorted(c))).to_dict()
    keys = pd.DataFrame(
        {
            "digest": digest.to_numpy(),
            "captions": np.array([alike.get(image, "") for image in rows["image"]], dtype=object),
            "image": rows["image"].to_numpy(),
            "caption": rows["caption"].to_numpy(),
            "pair_id": rows["pair_id"].astype(str).to_numpy(),
        }
    )
    return keys.sort_values(list(keys.columns), kind="mergesort").index.to_numpy()


def _own_names(rows: pd.DataFrame) -> list[str] | None:
    """Each row's own name for its picture, where some row names its picture otherwise than the
    picture's id (:attr:`PairSet.caption_image_names`), else None."""
    if "image_name" not in rows or rows["image_name"].equals(rows["image"]):
        return None
    return rows["image_name"].tolist()


_PREPARED: dict = {}


def prepare(table: CollectionTable, data: DataConfig, old_caches: Sequence[Path] = ()) -> PreparedCollection:
    """Refuse the rows whose image is outside the folder, missing or not a picture; extract the
    features of the rest (or take the table's image vectors; features kept in the user's cache
    folder once per picture, :func:`image_features`, those found in ``old_caches`` read from
    there); digest each image's content (of its features' grid); assign splits (carved by those
    digests where the table names none)."""
    from mispair.data.content import stored_digests
    from mispair.data.readers.embeddings import image_embedding_features
    from mispair.data.readers.splits import assign_splits

    if "image_embedding" in table.pairs:
        check_refusals(table)
        images = list(dict.fromkeys(table.pairs["image"]))
        features = image_embedding_features(table.pairs, images)
        digests = dict(zip(images, stored_digests(features)))
    else:
        table, found, images = _extracted(table, data, old_caches)
        features, digests = found.features, dict(zip(images, found.digests))
    splits, note = assign_splits(table.pairs, table.where, digests)
    table.pairs = table.pairs.assign(split=splits)
    return PreparedCollection(table, features, {image: i for i, image in enumerate(images)}, note, digests)


def _extracted(
    table: CollectionTable, data: DataConfig, old_caches: Sequence[Path]
) -> tuple[CollectionTable, PictureFeatures, list[str]]:
    """The table without the rows whose picture cannot be read, the features of its images, and
    the images in feature order."""
    table = _refuse_bad_paths(table, data.folder_allow_outside)
    check_refusals(table, warn=False)
    images = list(dict.fromkeys(table.pairs["image"]))
    found = image_features(table.image_root, images, data, old_caches)
    if not found.valid.all():
        unreadable = {image for image, ok in zip(images, found.valid) if not ok}
        table = _refuse(table, table.pairs["image"].isin(unreadable), "not a readable picture")
        kept = found.valid.nonzero()[0]
        found = PictureFeatures(found.features[kept], found.valid[kept], [found.digests[i] for i in kept])
        images = [images[i] for i in kept]
    check_refusals(table)
    return table, found, images


def _refuse_bad_paths(table: CollectionTable, allow_outside: bool) -> CollectionTable:
    images = table.pairs["image"]
    base = table.image_root.resolve()
    if not table.trusted_paths and not allow_outside:
        outside = images.map(lambda i: not (table.image_root / i).resolve().is_relative_to(base))
        table = _refuse(
            table,
            outside,
            "the image lies outside the collection's folder (set "
            "data.folder_allow_outside=true to read it anyway)",
        )
        images = table.pairs["image"]
    missing = images.map(lambda i: not _is_file(table.image_root / i))
    return _refuse(table, missing, "image file not found")


def _too_long(path: str) -> bool:
    """``path`` is longer than Linux allows a path (4096 bytes) or one of its names (255)."""
    encoded = os.fsencode(path)
    return len(encoded) >= 4096 or any(len(name) > 255 for name in encoded.split(b"/"))


def _is_file(path: Path) -> bool:
    """``path`` is a regular file (an error while asking, e.g. no permission, means no)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _refuse(table: CollectionTable, mask: pd.Series, reason: str) -> CollectionTable:
    if not mask.any():
        return table
    import pandas as pd

    refused = table.pairs[mask][["pair_id", "image", "caption"]].assign(reason=reason)
    return CollectionTable(
        table.pairs[~mask].reset_index(drop=True),
        pd.concat([table.refused, refused], ignore_index=True),
        table.image_root,
        table.where,
        table.trusted_paths,
    )


def image_features(
    root: Path, images: list[str], data: DataConfig, old_caches: Sequence[Path] = ()
) -> PictureFeatures:
    """The features of the image files ``images`` under ``root``: stacked ``.npy`` feature
    arrays when every image is one, else the features of ``data.image_encoder`` in
    ``data.image_form`` (``auto``: the grid), each picture kept once in the cache folder
    (``data.cache_dir``, else the user's: shared by every collection that holds the picture;
    also read from ``old_caches``)."""
    from mispair.data.cache_folder import cache_root
    from mispair.data.content import stored_digests

    if images and all(name.endswith(".npy") for name in images):
        features = _stack_npy(root, images)
        return PictureFeatures(features, np.ones(len(images), dtype=bool), stored_digests(features))
    from mispair.data.image_encoders import create_image_encoder
    from mispair.data.picture_features import extract_folder_features

    encoder = create_image_encoder(data.image_encoder, data.image_encoder_options)
    return extract_folder_features(
        root,
        images,
        cache_dir=Path(data.cache_dir).expanduser() if data.cache_dir else cache_root(),
        read_also=old_caches,
        encoder=encoder,
        runtime=data.encoder_runtime,
        form="grid" if data.image_form == "auto" else data.image_form,
    )


def _stack_npy(root: Path, images: list[str]) -> np.ndarray:
    from mispair.data.precomp import load_npy
    from mispair.sanity import feature_problem

    arrays = []
    for name in images:
        path = root / name
        array = load_npy(path)
        if array.ndim != 2 or (arrays and array.shape != arrays[0].shape):
            want = "[n_fragments, dim]" if not arrays else str(arrays[0].shape)
            raise DataError(f"{path}: feature array of shape {array.shape}, expected {want}")
        problem = feature_problem(array)
        if problem is not None:
            raise DataError(f"{path}: {problem}")
        arrays.append(array.astype(np.float32))
    return np.stack(arrays)

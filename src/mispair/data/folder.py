"""A plain folder format for users' own image–caption collections.

Schema: a directory ``ROOT`` holding ``captions.csv`` (header ``image,caption[,split]``) or
``captions.jsonl`` (one object per line with ``"image"``, ``"caption"`` and optionally
``"split"``). ``image`` is a path relative to ``ROOT`` of either

- a feature array ``.npy`` of shape ``[n_fragments, dim]`` (the same for every image), or
- an image file (``.png``, ``.jpg``, ...), whose EfficientNet-Lite0 grid features (49 × 1280) are
  extracted once and cached in ``ROOT/.mispair_cache/`` (needs ``pip install 'mispair[features]'``).

Every image path must lie inside ``ROOT`` once resolved (no ``..``, absolute path or link out of
it) unless ``allow_outside`` (config ``data.folder_allow_outside: true``) is given. A caption
longer than :data:`MAX_CAPTION_CHARS` characters is cut there, with a warning; an image file that
is not a readable picture is skipped with its captions, with a warning that counts them; a
missing file is an error. A UTF-8 byte-order
mark at the start of ``captions.csv`` is ignored.

An image may have several captions (rows). ``split`` is ``train``, ``dev`` or ``test``; without a
``split`` column the images are split deterministically (seed 0): 10% test (at most 1,000), 5% dev
(at most 500), the rest train.
"""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import numpy as np

from mispair.data.pairset import PairSet
from mispair.data.precomp import load_npy
from mispair.errors import DataError

_SPLITS = ("train", "dev", "test")
MAX_CAPTION_CHARS = 1000
"""Captions are cut to this many characters: work per caption stays bounded for any input."""
MAX_FIELD_CHARS = 10_000_000
"""A ``captions.csv`` field longer than this is an error (the file is not a caption list)."""


class UnreadableImageWarning(UserWarning):
    """Image files of a folder collection that are not readable pictures were skipped
    (``mispair audit`` makes this an error)."""


def read_folder(root: str | Path, split: str, *, allow_outside: bool = False) -> PairSet:
    """Read one split of a folder dataset (see the module docstring for the schema)."""
    root = Path(root)
    rows = _read_rows(root)
    if not allow_outside:
        _check_inside(root, rows)
    if split not in _SPLITS:
        raise DataError(f"{root}: split must be one of {', '.join(_SPLITS)}, got {split!r}")
    split_of = _split_images(rows, root)
    rows = [r for r in rows if split_of[r["image"]] == split]
    if not rows:
        raise DataError(f"{root}: no pairs in split {split!r}")
    images = list(dict.fromkeys(r["image"] for r in rows))
    features, valid = _load_features(root, images)
    if not valid.all():
        bad = [name for name, ok in zip(images, valid) if not ok]
        warnings.warn(f"{root}: skipped {len(bad)} unreadable image(s) of split {split!r} and their "
                      f"captions, e.g. {bad[0]!r}", UnreadableImageWarning, stacklevel=2)  # fmt: skip
        images = [name for name, ok in zip(images, valid) if ok]
        features, rows = features[valid], [r for r in rows if r["image"] in set(images)]
        if not rows:
            raise DataError(f"{root}: no readable images in split {split!r}")
    index = {image: i for i, image in enumerate(images)}
    rows.sort(key=lambda r: index[r["image"]])
    return PairSet(
        images=features,
        captions=[r["caption"] for r in rows],
        image_of_caption=np.array([index[r["image"]] for r in rows]),
        name=f"{root.name}/{split}",
        image_ids=images,
    )


def folder_splits(root: str | Path) -> list[str]:
    """The splits of a folder dataset that hold at least one pair, in the order train, dev, test."""
    root = Path(root)
    present = set(_split_images(_read_rows(root), root).values())
    return [split for split in _SPLITS if split in present]


def _read_rows(root: Path) -> list[dict[str, str]]:
    try:
        return _read_text_rows(root)
    except UnicodeDecodeError as exc:
        name = "captions.csv" if (root / "captions.csv").is_file() else "captions.jsonl"
        byte = exc.object[exc.start]
        raise DataError(f"{root / name}: not UTF-8 text (cannot decode byte 0x{byte:02x})") from None


def _read_text_rows(root: Path) -> list[dict[str, str]]:
    csv_path, jsonl_path = root / "captions.csv", root / "captions.jsonl"
    if csv_path.is_file():
        csv.field_size_limit(max(csv.field_size_limit(), MAX_FIELD_CHARS))
        with open(csv_path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            missing = {"image", "caption"} - set(reader.fieldnames or [])
            if missing:
                raise DataError(f"{csv_path}: missing column(s) {', '.join(sorted(missing))}")
            rows = []
            try:
                for row in reader:
                    rows.append((len(rows) + 2, dict(row)))
            except csv.Error as exc:  # the row after the last one read
                raise DataError(f"{csv_path}:{len(rows) + 2}: {exc} (a field may hold at most "
                                f"{MAX_FIELD_CHARS:,} characters)") from None  # fmt: skip
        path = csv_path
    elif jsonl_path.is_file():
        rows = []
        for n, line in enumerate(jsonl_path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                try:
                    rows.append((n, dict(json.loads(line))))
                except (ValueError, TypeError):
                    raise DataError(f"{jsonl_path}:{n}: not a JSON object") from None
        path = jsonl_path
    else:
        raise DataError(f"{root}: no captions.csv or captions.jsonl")
    checked = [_check_row(path, n, row) for n, row in rows]
    cut = sum(len(r["caption"]) > MAX_CAPTION_CHARS for r in checked)
    if cut:
        warnings.warn(f"{path}: {cut} caption(s) longer than {MAX_CAPTION_CHARS} characters were cut",
                      stacklevel=3)  # fmt: skip
        for r in checked:
            r["caption"] = r["caption"][:MAX_CAPTION_CHARS]
    return checked


def _check_inside(root: Path, rows: list[dict[str, str]]) -> None:
    """Refuse an image path that resolves outside ``root`` (``..``, absolute, a link out)."""
    base = root.resolve()
    for r in rows:
        if not (root / r["image"]).resolve().is_relative_to(base):
            raise DataError(f"{root}: image {r['image']!r} lies outside the collection's folder "
                            "(set data.folder_allow_outside=true to read it anyway)")  # fmt: skip


def _check_row(path: Path, line: int, row: dict) -> dict[str, str]:
    image, caption = str(row.get("image") or "").strip(), str(row.get("caption") or "").strip()
    if not image:
        raise DataError(f"{path}:{line}: missing image")
    if not caption:
        raise DataError(f"{path}:{line}: empty caption")
    split = str(row.get("split") or "").strip()
    if split and split not in _SPLITS:
        raise DataError(f"{path}:{line}: split must be one of {', '.join(_SPLITS)}, got {split!r}")
    return {"image": image, "caption": caption, "split": split}


def _split_images(rows: list[dict[str, str]], root: Path) -> dict[str, str]:
    images = sorted({r["image"] for r in rows})
    given = {r["image"]: r["split"] for r in rows if r["split"]}
    if given:
        missing = [i for i in images if i not in given]
        if missing:
            raise DataError(f"{root}: image {missing[0]!r} has no split (give every row a split)")
        return given
    order = np.random.default_rng(0).permutation(len(images))
    n_test = min(1000, len(images) // 10)
    n_dev = min(500, len(images) // 20)
    split_of = {}
    for rank, i in enumerate(order):
        split_of[images[i]] = "test" if rank < n_test else "dev" if rank < n_test + n_dev else "train"
    return split_of


def _load_features(root: Path, images: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``features [n, K, D]`` and ``valid [n]`` (False: an image file that is not a picture)."""
    if all(name.endswith(".npy") for name in images):
        return _stack_npy(root, images), np.ones(len(images), dtype=bool)
    from mispair.data.features import extract_folder_features

    return extract_folder_features(root, images)


def _stack_npy(root: Path, images: list[str]) -> np.ndarray:
    arrays = []
    for name in images:
        path = root / name
        array = load_npy(path)
        if array.ndim != 2 or (arrays and array.shape != arrays[0].shape):
            want = "[n_fragments, dim]" if not arrays else str(arrays[0].shape)
            raise DataError(f"{path}: feature array of shape {array.shape}, expected {want}")
        if not np.isfinite(array).all():
            raise DataError(f"{path}: NaN or infinite features")
        arrays.append(array.astype(np.float32))
    return np.stack(arrays)

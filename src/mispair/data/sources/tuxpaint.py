"""Tux Paint stamps (Debian package ``tuxpaint-stamps-default``) as an image–caption dataset.

Each stamp ``NAME`` in a category folder has ``NAME.txt`` — first line a human-written English
description, then ``lang.utf8=translation`` lines — and a picture ``NAME.png`` or, for about
165 stamps, only ``NAME.svg`` (rendered). One caption per image; the category folder (e.g.
``animals/amphibians``) is kept as the ``category`` metadata column.

Splits (seeded, see :func:`~mispair.data.sources.common.seeded_order`): ``train``/``dev``/``test``
with 100 dev and 150 test images, and ``k`` folds ``fold{i}_train``/``fold{i}_dev``/
``fold{i}_test``: fold ``i`` tests on the ``i``-th fifth, takes 100 dev images from the rest and
trains on the remainder. Split membership depends on the stamp names only, so every language
uses the same splits (stamps lacking the chosen translation are left out).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mispair.data.features import extract_grid_features, file_key
from mispair.data.pairset import PairSet
from mispair.data.pictures.images import load_picture
from mispair.data.sources.common import find_source_dir, seeded_order, write_splits
from mispair.errors import DataError

logger = logging.getLogger(__name__)

STAMPS_DIR = Path("/usr/share/tuxpaint/stamps")
PACKAGE = "tuxpaint-stamps-default"
N_TEST, N_DEV = 150, 100


@dataclass(frozen=True)
class Stamp:
    """One stamp: ``key`` is its path below the stamps folder without extension."""

    key: str
    image: Path
    descriptions: dict[str, str]

    @property
    def category(self) -> str:
        return self.key.rpartition("/")[0]


def parse_stamp_text(path: Path) -> dict[str, str]:
    """Descriptions by language from a stamp ``.txt``: ``{"en": first line, "fr": ..., ...}``.

    Raises:
        DataError: unreadable, not UTF-8, or an empty first line.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read stamp description ({exc})") from None
    if not lines or not lines[0].strip():
        raise DataError(f"{path}: empty first line (the English description)")
    descriptions = {"en": " ".join(lines[0].split())}
    for line in lines[1:]:
        lang, sep, text = line.partition(".utf8=")
        if sep and lang.strip() and text.strip():
            descriptions[lang.strip()] = " ".join(text.split())
    return descriptions


def find_stamps(stamps_dir: Path) -> list[Stamp]:
    """Every stamp under ``stamps_dir`` with a description and a PNG (else SVG), sorted by key."""
    stamps = []
    for text in sorted(Path(stamps_dir).rglob("*.txt")):
        pictures = (text.with_suffix(".png"), text.with_suffix(".svg"))
        image = next((p for p in pictures if p.is_file()), None)
        if image is None:
            logger.info("%s: no .png or .svg picture; stamp skipped", text)
            continue
        key = text.relative_to(stamps_dir).with_suffix("").as_posix()
        stamps.append(Stamp(key, image, parse_stamp_text(text)))
    return stamps


def split_indices(keys: list[str], seed: int, folds: int) -> dict[str, np.ndarray]:
    """Image indices of ``train``/``dev``/``test`` and of every ``fold{i}_*`` split (sorted).

    Test and dev hold 150 and 100 images (a fifth and an eighth of smaller collections).
    """
    order = seeded_order(keys, seed)
    n_test, n_dev = min(N_TEST, len(keys) // 5), min(N_DEV, len(keys) // 8)
    splits = _three_way(order[n_test + n_dev :], order[n_test : n_test + n_dev], order[:n_test], "")
    parts = np.array_split(order, folds) if folds > 1 else []
    for i, test in enumerate(parts):
        rest = np.concatenate(parts[i + 1 :] + parts[:i])
        splits.update(_three_way(rest[n_dev:], rest[:n_dev], test, f"fold{i}_"))
    return splits


def _three_way(train, dev, test, prefix: str) -> dict[str, np.ndarray]:
    named = {"train": train, "dev": dev, "test": test}
    return {prefix + name: np.sort(idx) for name, idx in named.items()}


def prepare_tuxpaint(
    out: Path | str = "data/tuxpaint_precomp",
    lang: str = "en",
    *,
    seed: int = 0,
    folds: int = 5,
    stamps_dir: Path | None = None,
    encoder=None,
    runtime: str = "torch",
    progress: bool = True,
) -> Path:
    """Build the Tux Paint dataset in the precomputed format; returns the output directory.

    Features (EfficientNet-Lite0, ``[n, 49, 1280]`` float16) are cached in ``out/cache`` and
    reused; splits already up to date are not rewritten.

    Args:
        lang: caption language, "en" or any ``lang`` of the ``lang.utf8=`` lines (e.g. "fr").
        folds: number of cross-validation folds (0 or 1: none).
        stamps_dir: the stamps folder (default: the Debian package's); other folders are
            untrusted (SVG entity declarations refused).
        encoder: a grid encoder module (see :func:`~mispair.data.features.extract_grid_features`).
        runtime: what runs it, ``torch`` or ``onnx`` (``mispair prepare --encoder-runtime``).

    Raises:
        DataError: the package is not installed, or no stamp has a ``lang`` description.
    """
    out = Path(out)
    root, trusted = find_source_dir(stamps_dir, STAMPS_DIR, PACKAGE)
    stamps = find_stamps(root)
    if not stamps:
        raise DataError(f"{root}: no Tux Paint stamps found")
    if not any(lang in s.descriptions for s in stamps):
        langs = sorted({k for s in stamps for k in s.descriptions})
        raise DataError(f"{root}: no stamp has a {lang!r} description (have: {', '.join(langs)})")
    features, valid = _features(stamps, out, encoder, runtime, trusted, progress)
    keep = [i for i, s in enumerate(stamps) if valid[i] and lang in s.descriptions]
    logger.info("tuxpaint: %d of %d stamps have a %r description", len(keep), len(stamps), lang)
    indices = split_indices([s.key for s in stamps], seed, folds)
    splits = _pairsets(stamps, features, lang, indices, keep)
    params = {"source": "tuxpaint", "lang": lang, "seed": seed, "folds": folds}
    write_splits(out, splits, params)
    return out


def _features(stamps: list[Stamp], out: Path, encoder, runtime: str, trusted: bool, progress: bool):
    size = getattr(encoder, "image_size", 224)

    def load(i: int):
        try:
            return load_picture(stamps[i].image, size, trusted=trusted)
        except DataError as exc:
            logger.warning("%s; stamp skipped", exc)
            return None

    keys = [file_key(s.image) for s in stamps]
    cache = out / "cache"
    return extract_grid_features(keys, load, cache, encoder, prune=True, progress=progress, runtime=runtime)


def _pairsets(stamps, features, lang, splits, keep) -> dict[str, PairSet]:
    kept = np.zeros(len(stamps), dtype=bool)
    kept[keep] = True
    result = {}
    for name, indices in splits.items():
        indices = indices[kept[indices]]
        chosen = [stamps[i] for i in indices]
        result[name] = PairSet(
            images=features[indices],
            captions=[s.descriptions[lang] for s in chosen],
            image_of_caption=np.arange(len(chosen)),
            name=f"tuxpaint/{name}",
            image_ids=[s.key + s.image.suffix for s in chosen],
            image_meta={"category": [s.category for s in chosen]},
        )
    return result

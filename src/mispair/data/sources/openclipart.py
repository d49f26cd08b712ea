"""OpenClipart 0.18 (Debian packages ``openclipart-png`` and ``openclipart-svg``): clip art with
captions written by web users, **naturally noisy**.

Pictures: every PNG below the PNG folder, de-duplicated by real path (1,221 of the 8,121 paths
are symlinks into another category); the id is the real file's path below the folder and the
category its folder. A PNG above 20 megapixels is rendered from its SVG instead.

Captions come from the RDF metadata of the same-path SVG: the first ``<dc:title>`` (later ones
name the library or the author), the first ``<dc:description>`` and the ``<rdf:li>`` keywords of
``<dc:subject>``. ``caption_source`` picks

- ``"title"``: the title, plus the description when it adds information
  (:func:`informative_description`); the file name's words when both are empty;
- ``"title+desc+keywords"``: that, then the keywords;
- ``"filename"``: the words of the file name.

Natural noise (:func:`natural_noise`): a title is *boilerplate* when it names a collection or
theme, credits an author, carries a date, or is a known collection name (``gramastar``), **and**
at least ``MIN_GROUP`` images share it (grouped after removing digits, parenthesised text and
the part after " - " of an author credit). Such captions do not describe their picture; the
label is written for the train split as ``train_natural_noise.npy`` (caption sources with a
title only) so noise detection can be scored on real noise.

Splits (seeded, fixed): 1,000 test and 500 dev images drawn only from *eval-eligible* images
(:func:`eval_eligible`: a unique, content-bearing, non-boilerplate title caption); every other
image is in train, with its natural noise untouched. The splits do not depend on
``caption_source``.
"""

from __future__ import annotations

import html
import logging
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mispair.data.features import extract_grid_features, file_key
from mispair.data.pairset import PairSet
from mispair.data.pictures.images import load_picture, require
from mispair.data.sources.common import find_source_dir, seeded_order, write_splits
from mispair.errors import DataError

logger = logging.getLogger(__name__)

PNG_DIR = Path("/usr/share/openclipart/png")
SVG_DIR = Path("/usr/share/openclipart/svg")
CAPTION_SOURCES = ("title", "title+desc+keywords", "filename")
N_TEST, N_DEV = 1000, 500
MIN_GROUP = 5

_DC = "{http://purl.org/dc/elements/1.1/}"
_RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"
_COLLECTION = re.compile(
    r"\b(collection|theme|iconset|icons|cliparts?|symbols|signs|maps|library|s[iu]bmission)\b"
)
_CREDIT = re.compile(r"^clipart by\b")
_DATE = re.compile(r"\b(19|20)\d\d\b")
_NAMED_COLLECTIONS = frozenset({"gramastar"})
_NOT_A_DESCRIPTION = re.compile(r"https?://|www\.|@|public domain|creative commons", re.IGNORECASE)


@dataclass(frozen=True)
class ClipMeta:
    """The RDF metadata of one clip (empty strings when absent)."""

    title: str = ""
    description: str = ""
    keywords: tuple[str, ...] = ()
    creator: str = ""


@dataclass(frozen=True)
class Clip:
    """One distinct picture: ``id`` is the real PNG's path below the PNG folder."""

    id: str
    png: Path
    svg: Path
    meta: ClipMeta

    @property
    def category(self) -> str:
        return self.id.rpartition("/")[0]


def parse_svg_metadata(path: Path, *, trusted: bool = False) -> ClipMeta:
    """Read title, description, keywords and creator from an SVG's RDF metadata.

    Parsing stops at the end of the first ``<metadata>`` element. Untrusted files may not
    declare XML entities.

    Raises:
        DataError: unreadable or malformed XML, or entity declarations in an untrusted file.
    """
    defused, element_tree = require("defusedxml"), require("defusedxml.ElementTree")
    found: dict[str, list[str]] = {"title": [], "description": [], "keywords": [], "creator": []}
    open_tags: list[str] = []
    try:
        events = element_tree.iterparse(str(path), ("start", "end"), forbid_entities=not trusted)
        for event, element in events:
            if event == "start":
                open_tags.append(element.tag)
                continue
            open_tags.pop()
            _collect(element, open_tags, found)
            if element.tag.endswith("}metadata") or element.tag == "metadata":
                break
    except (OSError, SyntaxError, ValueError, defused.DefusedXmlException) as exc:
        raise DataError(f"{path}: cannot read SVG metadata ({type(exc).__name__}: {exc})") from None
    first = {key: values[0] if values else "" for key, values in found.items()}
    return ClipMeta(first["title"], first["description"], tuple(found["keywords"]), first["creator"])


def _collect(element, open_tags: list[str], found: dict[str, list[str]]) -> None:
    text = " ".join(html.unescape(element.text or "").split())
    if element.tag == _DC + "title":
        found["creator" if _DC + "creator" in open_tags else "title"].append(text)
    elif element.tag == _DC + "description":
        found["description"].append(text)
    elif element.tag == _RDF + "li" and _DC + "subject" in open_tags and text:
        found["keywords"].append(text)


def find_clips(png_dir: Path, svg_dir: Path, *, trusted: bool = False) -> list[Clip]:
    """Every distinct PNG (by real path) with its SVG metadata, sorted by id.

    PNGs without a readable same-path SVG are skipped (logged).
    """
    real_root = Path(os.path.realpath(png_dir))
    by_real: dict[Path, Path] = {}
    for png in sorted(Path(png_dir).rglob("*.png")):
        by_real.setdefault(Path(os.path.realpath(png)), png)
    clips = []
    for real, png in sorted(by_real.items()):
        rel = real.relative_to(real_root) if real.is_relative_to(real_root) else png.relative_to(png_dir)
        svg = Path(svg_dir) / rel.with_suffix(".svg")
        try:
            clips.append(Clip(rel.as_posix(), real, svg, parse_svg_metadata(svg, trusted=trusted)))
        except DataError as exc:
            logger.warning("%s; picture skipped", exc)
    return clips


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def informative_description(meta: ClipMeta) -> str:
    """The description when it adds information to the title, else "".

    Not informative: empty; equal to or contained in the title; a URL, e-mail or licence text;
    the author's name; boilerplate (a collection or theme name); no word of 3+ letters.
    """
    description, words = meta.description, _words(meta.description)
    if not words or f" {words} " in f" {_words(meta.title)} " or words == _words(meta.creator):
        return ""
    if _NOT_A_DESCRIPTION.search(description) or _is_boilerplate(description, meta.creator):
        return ""
    return description if re.search(r"[A-Za-z]{3}", description) else ""


def filename_words(clip: Clip) -> str:
    """The letters-only words of the file name (else of its folder): ``"dead frogs lumen"``."""
    for name in (Path(clip.id).stem, Path(clip.category).name):
        words = re.findall(r"[a-z]+", name.lower())
        if words:
            return " ".join(words)
    return "clip art"


def make_caption(clip: Clip, source: str = "title") -> str:
    """The caption of ``clip`` from ``source`` (one of :data:`CAPTION_SOURCES`)."""
    if source == "filename":
        return filename_words(clip)
    parts = [p for p in (clip.meta.title, informative_description(clip.meta)) if p]
    caption = ". ".join(p.rstrip(" .") for p in parts) or filename_words(clip)
    if source == "title+desc+keywords" and clip.meta.keywords:
        keywords = list(dict.fromkeys(k.lower() for k in clip.meta.keywords))
        caption = f"{caption.rstrip(' .')}. {', '.join(keywords)}"
    return caption


def _is_boilerplate(text: str, creator: str) -> bool:
    flat = " ".join(re.sub(r"[_\-]", " ", text.lower()).split())
    return bool(
        _COLLECTION.search(flat)
        or _CREDIT.search(flat)
        or _DATE.search(flat)
        or flat in _NAMED_COLLECTIONS
        or (creator and _words(text) == _words(creator))
    )


def boilerplate_group(title: str) -> str:
    """The key grouping titles that differ only by digits, a date, or what follows a credit."""
    key = re.sub(r"\(.*?\)", " ", title.lower())
    if _CREDIT.search(key):
        key = key.split(" - ")[0]
    return " ".join(re.sub(r"[\d_\-]", " ", key).split())


def natural_noise(clips: list[Clip]) -> np.ndarray:
    """``[n]`` bool: the clip's title is boilerplate shared by at least ``MIN_GROUP`` images."""
    groups = Counter(boilerplate_group(c.meta.title) for c in clips)
    return np.array(
        [
            bool(c.meta.title)
            and groups[boilerplate_group(c.meta.title)] >= MIN_GROUP
            and _is_boilerplate(c.meta.title, c.meta.creator)
            for c in clips
        ],
        dtype=bool,
    )


def eval_eligible(clips: list[Clip], noise: np.ndarray) -> np.ndarray:
    """``[n]`` bool: may go to dev/test — a unique (case-insensitive) ``"title"`` caption, not
    natural noise, and a content-bearing title (a word of 3+ letters, no ``_``, not boilerplate).
    """
    captions = [_words(make_caption(c, "title")) for c in clips]
    counts = Counter(captions)
    return np.array(
        [
            counts[caption] == 1
            and not noisy
            and re.search(r"[A-Za-z]{3}", c.meta.title) is not None
            and "_" not in c.meta.title
            and not _is_boilerplate(c.meta.title, c.meta.creator)
            for c, caption, noisy in zip(clips, captions, noise)
        ],
        dtype=bool,
    )


def split_indices(ids: list[str], eligible: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Sorted image indices of ``train``/``dev``/``test``; dev and test only from ``eligible``."""
    order = seeded_order(ids, seed)
    candidates = order[eligible[order]]
    if len(candidates) < N_TEST + N_DEV + 1:
        n_test = len(candidates) // 3
        n_dev = len(candidates) // 6
    else:
        n_test, n_dev = N_TEST, N_DEV
    test, dev = candidates[:n_test], candidates[n_test : n_test + n_dev]
    train = np.setdiff1d(np.arange(len(ids)), np.concatenate([test, dev]))
    return {"train": train, "dev": np.sort(dev), "test": np.sort(test)}


def prepare_openclipart(
    out: Path | str = "data/openclipart_precomp",
    caption_source: str = "title",
    *,
    seed: int = 0,
    png_dir: Path | None = None,
    svg_dir: Path | None = None,
    encoder=None,
    runtime: str = "torch",
    progress: bool = True,
) -> Path:
    """Build the OpenClipart dataset in the precomputed format; returns the output directory.

    Features (EfficientNet-Lite0, ``[n, 49, 1280]`` float16) are cached in ``out/cache`` and
    reused; splits already up to date are not rewritten.

    Args:
        caption_source: one of :data:`CAPTION_SOURCES` (see the module docstring).
        png_dir, svg_dir: the clip-art folders (default: the Debian packages'); SVGs elsewhere are
            untrusted (XML entity declarations refused).
        encoder: a grid encoder module (see :func:`~mispair.data.features.extract_grid_features`).
        runtime: what runs it, ``torch`` or ``onnx`` (``mispair prepare --encoder-runtime``).

    Raises:
        DataError: a package is not installed, an unknown caption source, or no clip found.
    """
    if caption_source not in CAPTION_SOURCES:
        raise DataError(f"caption source {caption_source!r}: expected one of {', '.join(CAPTION_SOURCES)}")
    out = Path(out)
    png_root, _ = find_source_dir(png_dir, PNG_DIR, "openclipart-png")
    svg_root, trusted = find_source_dir(svg_dir, SVG_DIR, "openclipart-svg")
    clips = find_clips(png_root, svg_root, trusted=trusted)
    features, valid = _features(clips, out, encoder, runtime, trusted, progress)
    clips, features = [c for c, ok in zip(clips, valid) if ok], features[valid]
    if not clips:
        raise DataError(f"{png_root}: no usable clip art found")
    noise = natural_noise(clips)
    splits = split_indices([c.id for c in clips], eval_eligible(clips, noise), seed)
    pairsets = {name: _pairset(clips, features, idx, caption_source, name) for name, idx in splits.items()}
    extras = {} if caption_source == "filename" else {"train": {"natural_noise": noise[splits["train"]]}}
    params = {"source": "openclipart", "caption_source": caption_source, "seed": seed}
    write_splits(out, pairsets, params, extras)
    return out


def _features(clips: list[Clip], out: Path, encoder, runtime: str, trusted: bool, progress: bool):
    size = getattr(encoder, "image_size", 224)

    def load(i: int):
        try:
            return load_picture(clips[i].png, size, svg=clips[i].svg, trusted=trusted)
        except DataError as exc:
            logger.warning("%s; picture skipped", exc)
            return None

    keys = [f"{file_key(c.png)}|{file_key(c.svg)}" for c in clips]
    cache = out / "cache"
    return extract_grid_features(keys, load, cache, encoder, prune=True, progress=progress, runtime=runtime)


def _pairset(clips, features, indices, caption_source: str, split: str) -> PairSet:
    chosen = [clips[i] for i in indices]
    return PairSet(
        images=features[indices],
        captions=[make_caption(c, caption_source) for c in chosen],
        image_of_caption=np.arange(len(chosen)),
        name=f"openclipart/{split}",
        image_ids=[c.id for c in chosen],
        image_meta={
            "category": [c.category for c in chosen],
            "title": [c.meta.title for c in chosen],
            "description": [c.meta.description for c in chosen],
            "keywords": ["; ".join(c.meta.keywords) for c in chosen],
        },
    )

"""The published precomputed format of SCAN/NCR/RCL/L2RM/PC² (``f30k_precomp``, ``coco_precomp``,
``cc152k_precomp``), which mispair also writes for its own prepared datasets.

A directory holds, per split (``train``, ``dev``, ``test``, ``testall`` for COCO 5K, ...):

- ``{split}_ims.npy``: float array ``[n_images, n_fragments, dim]`` (36×2048 for the benchmarks);
- ``{split}_caps.txt``: one caption per line; with ``c`` times as many captions as images, caption
  ``k`` belongs to image ``k // c``; or ``{split}_caps.tsv`` (CC152K): ``img_id<TAB>caption``, one
  caption per image, in image order;
- optional ``{split}_ids.txt``: one image id per line;
- optional ``{split}_meta.json`` (mispair's extension): ``{"image_meta": {column: [n_images values]}}``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mispair.atomic import atomic_text, atomic_write, ensure_directory
from mispair.data.mapped import row_blocks
from mispair.data.pairset import PairSet
from mispair.data.text_bounds import cut_long_texts, read_lines, warn_cut
from mispair.errors import DataError
from mispair.limits import limit, raise_hint
from mispair.sanity import feature_problem


def available_splits(root: str | Path) -> list[str]:
    """Split names with an ``{split}_ims.npy`` file in ``root``."""
    return sorted(p.name[: -len("_ims.npy")] for p in Path(root).glob("*_ims.npy"))


def read_precomp(root: str | Path, split: str, *, check_finite: bool = True) -> PairSet:
    """Read one split of a precomputed-feature directory (see the module docstring).

    Features are memory-mapped, so a 145K×36×2048 train split does not need to fit in memory.

    Raises:
        DataError: a missing directory or split, unreadable or inconsistent files, an empty
            caption, NaN/inf features; the message names the file.

    Example:
        >>> pairs = read_precomp("data/f30k_precomp", "test")  # doctest: +SKIP
        >>> pairs.n_images, pairs.n_captions, pairs.captions_per_image  # doctest: +SKIP
        (1000, 5000, 5)
    """
    root = Path(root)
    ims_path = split_features_path(root, split)
    images = load_feature_array(ims_path, check_finite)
    captions, tsv_ids = _read_captions(root, split)
    n_images, n_captions = images.shape[0], len(captions)
    if n_images == 0 or n_captions % n_images:
        raise DataError(
            f"{root}/{split}_caps: {n_captions} captions do not divide evenly over "
            f"{n_images} images in {ims_path.name}"
        )
    per_image = n_captions // n_images
    image_ids = tsv_ids if tsv_ids is not None else _read_ids(root / f"{split}_ids.txt", n_images)
    return PairSet(
        images=images,
        captions=captions,
        image_of_caption=np.arange(n_captions) // per_image,
        name=f"{root.name}/{split}",
        image_ids=image_ids,
        image_meta=_read_meta(root / f"{split}_meta.json"),
    )


def split_features_path(root: Path, split: str) -> Path:
    """``root/{split}_ims.npy``, or a DataError naming what is missing (and the splits present)."""
    if not root.is_dir():
        raise DataError(f"{root}: no such data directory{_how_to_get(root)}")
    ims_path = root / f"{split}_ims.npy"
    if not ims_path.is_file():
        found = ", ".join(available_splits(root)) or "none"
        raise DataError(f"{ims_path}: split {split!r} not found (splits present: {found})")
    return ims_path


def _how_to_get(root: Path) -> str:
    """A hint for the data sets mispair knows by folder name."""
    name = root.name
    if name in ("tuxpaint_precomp", "openclipart_precomp"):
        return f" (run `mispair prepare {name.removesuffix('_precomp')}` in {Path.cwd()})"
    if name in ("f30k_precomp", "coco_precomp", "cc152k_precomp", "now100k_precomp"):
        return " (the published features cannot be downloaded by mispair: see the README's Data section)"
    return ""


def write_precomp(pairs: PairSet, root: str | Path, split: str) -> None:
    """Write ``pairs`` as ``split`` of a precomputed-feature directory, atomically per file.

    The captions must be in the standard layout (caption ``k`` of image ``k // c``).
    """
    per_image = pairs.captions_per_image
    if per_image is None:
        raise DataError(f"{pairs.name}: captions must be grouped per image (caption k of image k // c)")
    for k, caption in enumerate(pairs.captions):
        if not caption.strip() or "\n" in caption:
            raise DataError(f"{pairs.name}: caption {k} is empty or contains a newline")
    root = ensure_directory(root, "dataset folder")  # a file there is one line, not a traceback
    atomic_write(root / f"{split}_ims.npy", lambda f: np.save(f, np.asarray(pairs.images)))
    atomic_text(root / f"{split}_caps.txt", "".join(c.strip() + "\n" for c in pairs.captions))
    if pairs.image_ids is not None:
        atomic_text(root / f"{split}_ids.txt", "".join(f"{i}\n" for i in pairs.image_ids))
    if pairs.image_meta:
        meta = json.dumps({"image_meta": pairs.image_meta}, ensure_ascii=False)
        atomic_text(root / f"{split}_meta.json", meta)


def load_npy(path: Path | str, *, mmap: bool = False) -> np.ndarray:
    """The array of a ``.npy`` file (never a pickle); a missing, empty, truncated or foreign file
    is a one-line :class:`DataError` naming it; its header is checked first
    (:func:`mispair.safe_parse.check_npy`: a regular file whose declared data it holds, no larger
    than ``MAX_ARRAY_BYTES`` unless mapped)."""
    from mispair.safe_parse import check_npy

    try:
        check_npy(path, bounded=not mmap)
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except EOFError:
        raise DataError(f"{path}: not a readable .npy array (the file is empty)") from None
    except (ValueError, OSError) as exc:
        raise DataError(f"{path}: not a readable .npy array ({exc})") from None


def load_feature_array(path: Path, check_finite: bool) -> np.ndarray:
    """The ``[n_images, n_fragments, dim]`` float features of a ``.npy`` file, memory-mapped;
    with ``check_finite`` a NaN or infinite feature is an error naming the image."""
    images = load_npy(path, mmap=True)
    if images.ndim != 3:
        raise DataError(f"{path}: expected [n_images, n_fragments, dim], got shape {images.shape}")
    if not np.issubdtype(images.dtype, np.floating):
        raise DataError(f"{path}: expected float features, got dtype {images.dtype}")
    if check_finite:  # and within float32's reach once squared (sanity.feature_problem)
        for rows, block in row_blocks(images):
            if feature_problem(block) is not None:
                row = rows.start + next(k for k in range(len(block)) if feature_problem(block[k]))
                raise DataError(f"{path}: image {row} has {feature_problem(block[row - rows.start])}")
    return images


def _read_captions(root: Path, split: str) -> tuple[list[str], list[str] | None]:
    txt, tsv = root / f"{split}_caps.txt", root / f"{split}_caps.tsv"
    if txt.is_file():
        (lines, cut), ids = read_lines(txt, limit("MAX_TEXT_CHARS")), None
        warn_cut(cut, txt)
    elif tsv.is_file():
        ids, lines = [], []
        for number, line in enumerate(read_text_lines(tsv), start=1):
            if "\t" not in line:
                raise DataError(f"{tsv}:{number}: expected 'img_id<TAB>caption'")
            image_id, caption = line.split("\t", 1)
            ids.append(image_id.strip())
            lines.append(caption)
        lines = cut_long_texts(lines, tsv)
    else:
        raise DataError(f"{txt}: no captions for split {split!r} ({txt.name} or {tsv.name})")
    path = txt if txt.is_file() else tsv
    for number, caption in enumerate(lines, start=1):
        if not caption.strip():
            raise DataError(f"{path}:{number}: empty caption")
    return [c.strip() for c in lines], ids


def read_text_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file (a final newline ends the last line; ``\\r`` stripped).

    Raises:
        DataError: not UTF-8, or a line longer than ``MAX_LINE_CHARS`` (read no further than that).
    """
    bound = limit("MAX_LINE_CHARS")
    lines, cut = read_lines(path, bound)
    if cut:
        raise DataError(f"{path}: a line of more than {bound:,} characters ({raise_hint('MAX_LINE_CHARS')})")
    return lines


def _read_ids(path: Path, n_images: int) -> list[str] | None:
    if not path.is_file():
        return None
    ids = read_text_lines(path)
    if len(ids) != n_images:
        raise DataError(f"{path}: {len(ids)} ids for {n_images} images")
    return ids


def _read_meta(path: Path) -> dict[str, list]:
    if not path.is_file():
        return {}
    try:
        return dict(json.loads(path.read_text(encoding="utf-8"))["image_meta"])
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path}: not a mispair metadata file ({exc})") from None


def read_natural_noise(root: Path | str, split: str) -> np.ndarray | None:
    """The ``[n_captions]`` bool natural-noise labels of ``split``, or None when not written.

    Raises:
        DataError: the file is unreadable or not a 1-D bool array.
    """
    path = Path(root) / f"{split}_natural_noise.npy"
    if not path.is_file():
        return None
    labels = load_npy(path)
    if labels.ndim != 1 or labels.dtype != bool:
        raise DataError(f"{path}: expected a 1-D bool array, got {labels.dtype} {labels.shape}")
    return labels

"""The features of picture files, each distinct picture encoded once and stored once.

:func:`picture_features` keys every picture by its content (:func:`content_key`: its bytes'
digest and whether it is drawn as SVG), reads the entries the store holds
(:class:`~mispair.data.picture_store.PictureStore`), encodes each missing content once (the same
picture under several names or in several collections too), stores it, and returns the rows in
the pictures' order (:class:`~mispair.data.picture_store.PictureFeatures`). Several processes
sharing the store (torchrun) encode their own block of the missing pictures first
(:func:`~mispair.data.features.claim_order`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
from torch import nn

from mispair.data.cache_files import Rejected
from mispair.data.cache_folder import cache_root, private_folder
from mispair.data.content import stored_digests
from mispair.data.features import (
    PREPROCESS_VERSION,
    EfficientNetLite0Grid,
    GridRunner,
    claim_order,
    content_digest,
    process_rank,
)
from mispair.data.picture_store import Entry, PictureFeatures, PictureStore, cap, evict
from mispair.data.pictures import images as pictures
from mispair.errors import DataError
from mispair.onnx_runtime import check_runtime
from mispair.progress import progress_bar

CHUNK = 64
"""Pictures encoded between two looks at the store (another process may have stored them)."""


def content_key(path: Path) -> str | None:
    """What a picture's features depend on besides the encoder: how it is drawn (``svg`` by its
    name, else ``raster``) and the digest of its bytes; None for a file that cannot be read."""
    digest = content_digest(path)
    if digest == "unreadable":
        return None
    return f"{'svg' if Path(path).suffix.lower() == '.svg' else 'raster'}:{digest}"


def content_keys(paths: Sequence[Path], threads: int = 4) -> list[str | None]:
    """:func:`content_key` of every path, ``threads`` at a time (hashing releases the GIL)."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(content_key, paths))


def picture_features(
    paths: Sequence[Path],
    load: Callable[[int], object | None],
    store: PictureStore,
    runner: GridRunner,
    *,
    progress: bool = True,
) -> PictureFeatures:
    """The features of the pictures ``paths`` in ``store``'s form, from ``store`` where it holds
    them, else encoded by ``runner`` (``load(i)``: picture ``i`` decoded, None when it cannot be)
    and stored (unless its file changed while it was encoded); the store is cut to its cap
    (:func:`~mispair.data.picture_store.cap`) when this call wrote to it."""
    keys = content_keys(paths)
    rejected = Rejected("image feature cache")
    found: dict[str | None, Entry] = {}
    for key in dict.fromkeys(k for k in keys if k is not None):
        if (entry := store.load(key, rejected)) is not None:
            found[key] = entry
    todo = _firsts(keys, found)
    runner.pictures = len(todo)
    done, hide = len(paths) - len(todo), not progress
    with (
        progress_bar(total=len(paths), initial=done, desc="features", unit="img", disable=hide) as bar,
        ThreadPoolExecutor(max_workers=1) as writer,
    ):
        chunks = [todo[s : s + CHUNK] for s in range(0, len(todo), CHUNK)]
        storing: tuple[int, Future] | None = None  # a chunk the writer stores while the next is encoded
        for k in [*claim_order(len(chunks), *process_rank()), *range(len(chunks))]:
            if storing is not None and storing[0] == k:  # this chunk again: its entries first
                found.update(storing[1].result())
                storing = None
            wanted = [i for i in chunks[k] if keys[i] is None or keys[i] not in found]
            from_store, finish = _encoded(wanted, keys, paths, load, store, runner, rejected, bar)
            found.update(from_store)
            if storing is not None:
                found.update(storing[1].result())
            storing = None if finish is None else (k, writer.submit(finish))
        if storing is not None:
            found.update(storing[1].result())
    rejected.warn()
    if todo and process_rank()[0] == 0:
        evict(store.folder, cap())
    return _assembled(keys, found)


def _firsts(keys: list[str | None], found: dict[str | None, Entry]) -> list[int]:
    """The first picture of each content ``found`` lacks, and every unreadable one."""
    seen: set[str] = set()
    out = []
    for i, key in enumerate(keys):
        if key is None or (key not in found and key not in seen):
            out.append(i)
            seen.add(key or "")
    return out


def _encoded(
    indices: list[int],
    keys: list[str | None],
    paths: Sequence[Path],
    load: Callable[[int], object | None],
    store: PictureStore,
    runner: GridRunner,
    rejected: Rejected,
    bar,
) -> tuple[dict[str | None, Entry], Callable[[], dict[str | None, Entry]] | None]:
    """The entries of the pictures ``indices`` another process stored meanwhile, and for the
    others, encoded here, a function that makes their entries and stores each whose file still
    has the content it was keyed by (run on the writer thread while the next chunk is encoded;
    None when there are none)."""
    out: dict[str | None, Entry] = {}
    if indices and process_rank()[1] > 1:
        for i in indices:
            key = keys[i]
            if key is not None and (entry := store.load(key, rejected)) is not None:
                out[key] = entry
        indices = [i for i in indices if keys[i] is None or keys[i] not in out]
    if not indices:
        return out, None
    grids, valid = runner.run(load, indices, bar)

    def stored() -> dict[str | None, Entry]:
        features = grids.astype(np.float32).mean(axis=1, keepdims=True) if store.form == "mean" else grids
        digests = stored_digests(grids)
        entries: dict[str | None, Entry] = {}
        for j, i in enumerate(indices):
            entry = Entry(features[j], bool(valid[j]), digests[j])
            key = keys[i]
            if key is not None and content_key(paths[i]) == key:
                store.save(key, entry)
            entries[key if key is not None else f"unreadable:{i}"] = entry
        return entries

    return out, stored


def _assembled(keys: list[str | None], found: dict) -> PictureFeatures:
    """The rows of ``keys`` from ``found`` (an unreadable picture's under ``unreadable:i``)."""
    entries = [found[k if k is not None else f"unreadable:{i}"] for i, k in enumerate(keys)]
    if not entries:
        return PictureFeatures(np.zeros((0, 0, 0), dtype=np.float16), np.zeros(0, dtype=bool), [])
    features = np.stack([e.features for e in entries])
    return PictureFeatures(
        features, np.array([e.valid for e in entries], dtype=bool), [e.digest for e in entries]
    )


def extract_folder_features(
    root: Path,
    images: list[str],
    *,
    progress: bool = True,
    cache_dir: Path | None = None,
    encoder: nn.Module | None = None,
    runtime: str = "torch",
    read_also: Sequence[Path] = (),
    form: str = "grid",
) -> PictureFeatures:
    """The features of the image files ``images`` under ``root`` (a user's folder), in ``form``:
    ``grid`` (``[n, h·w, D]`` float16, e.g. ``[n, 49, 1280]``) or ``mean`` (``[n, 1, D]``
    float32, the mean of the grid), with ``valid [n]`` (False for a file that is not a readable
    picture: its features are zeros) and each picture's content digest
    (:class:`~mispair.data.picture_store.PictureFeatures`). ``encoder``: another extractor
    (:mod:`mispair.data.image_encoders`), default EfficientNet-Lite0, run by ``runtime``
    (``torch`` or ``onnx``, ``data.encoder_runtime``).

    SVGs are rendered as untrusted files; each distinct picture is encoded once and stored in the
    cache folder ``cache_dir`` (default: the user's, :func:`~mispair.data.cache_folder.cache_root`;
    ``root`` is only read; :mod:`mispair.data.picture_store`), entries found in the cache folders
    ``read_also`` read from there.

    Raises:
        DataError: an image file is missing (the message names it).
    """
    paths = [Path(root) / name for name in images]
    missing = [name for name, path in zip(images, paths) if not path.is_file()]
    if missing:
        raise DataError(f"{root}: {len(missing)} image file(s) not found, e.g. {missing[0]!r}")

    size = getattr(encoder, "image_size", EfficientNetLite0Grid.image_size)

    def load(i: int) -> object | None:
        try:
            return pictures.load_picture(paths[i], size)
        except DataError:
            return None

    name = (
        EfficientNetLite0Grid.cache_name
        if encoder is None
        else getattr(encoder, "cache_name", type(encoder).__name__)
    )
    root_dir = private_folder(cache_dir or cache_root(), "image feature cache")
    store = PictureStore(root_dir, f"{name}\n{PREPROCESS_VERSION}", form, tuple(Path(f) for f in read_also))
    runner = GridRunner(encoder, None, 8, check_runtime(runtime))
    return picture_features(paths, load, store, runner, progress=progress)

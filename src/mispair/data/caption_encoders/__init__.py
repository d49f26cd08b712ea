"""Frozen encoders that turn each caption into one vector before training, by name
(``data.caption_encoder``); the ``precomputed`` text encoder then learns a projection of them.

An entry is a class registered with :func:`register_caption_encoder`, built from
``data.caption_encoder_options``, with a ``cache_name`` (the model and its weights) and
``encode(captions) -> [n, D]`` float32 (loading its model on first use). Registered here:

- ``open_clip``: an open_clip model's text tower, weights from a local file (``mispair[clip]``);
- ``huggingface``: a Hugging Face transformer from a local folder, its token states mean-pooled.

:func:`caption_vectors` computes a split's vectors once and keeps them in the collection's cache
folder, named by the encoder and the captions. Adding an encoder is adding one module here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mispair.data.cache_files import BadEntry, Rejected, write_arrays
from mispair.data.cache_folder import private_folder
from mispair.registry import Registry


class CaptionEncoder(Protocol):
    cache_name: str

    def encode(self, captions: list[str]) -> np.ndarray: ...


CAPTION_ENCODERS: Registry[Any] = Registry("caption encoder", "data.caption_encoder", __name__)
register_caption_encoder = CAPTION_ENCODERS.register


def caption_vectors(
    name: str,
    options: dict[str, Any],
    captions: list[str],
    cache_dir: Path | None,
    batch_size: int = 64,
    read_also: Sequence[Path] = (),
) -> np.ndarray:
    """``[len(captions), D]`` float32 vectors of ``captions`` by the encoder ``name``, read from
    ``cache_dir/captions/`` (or ``captions/`` of a folder of ``read_also``, never written) when
    computed before and the entry passes its check (:mod:`mispair.data.cache_files`: one finite
    row per caption), and written to ``cache_dir/captions/`` when computed now."""
    encoder: CaptionEncoder = CAPTION_ENCODERS.get(name)(options)
    digest = hashlib.blake2b("\n".join(captions).encode("utf-8", "surrogateescape"), digest_size=12)
    file = f"{encoder.cache_name}-{digest.hexdigest()}.vectors"
    folder = None if cache_dir is None else private_folder(Path(cache_dir) / "captions", "caption cache")
    rejected = Rejected("caption vector cache")

    def check(arrays: dict[str, np.ndarray]) -> None:
        vectors = arrays.get("vectors")
        if vectors is None or vectors.ndim != 2 or len(vectors) != len(captions):
            raise BadEntry(f"not {len(captions)} caption vectors")

    places = [] if folder is None else [folder / file]
    for path in [*places, *(Path(f) / "captions" / file for f in read_also)]:
        found = rejected.load(path, check, discard=path.parent == folder)
        if found is not None:
            rejected.warn()
            return found["vectors"].astype(np.float32, copy=False)
    rejected.warn()
    parts = [encoder.encode(captions[s : s + batch_size]) for s in range(0, len(captions), batch_size)]
    vectors = np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, 1), dtype=np.float32)
    if folder is not None:
        write_arrays(folder / file, {"vectors": vectors})
    return vectors

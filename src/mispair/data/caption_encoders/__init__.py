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

from mispair.atomic import atomic_write
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
    computed before, and written to ``cache_dir/captions/`` when computed now."""
    encoder: CaptionEncoder = CAPTION_ENCODERS.get(name)(options)
    digest = hashlib.blake2b("\n".join(captions).encode("utf-8", "surrogateescape"), digest_size=12)
    file = f"{encoder.cache_name}-{digest.hexdigest()}.npy"
    path = None if cache_dir is None else Path(cache_dir) / "captions" / file
    before = [p for p in [path, *(Path(f) / "captions" / file for f in read_also)] if p is not None]
    found = next((p for p in before if p.is_file()), None)
    if found is not None:
        from mispair.safe_parse import check_npy

        check_npy(found)  # a cache file is checked like any input: regular, header within bounds
        return np.load(found, allow_pickle=False)
    parts = [encoder.encode(captions[s : s + batch_size]) for s in range(0, len(captions), batch_size)]
    vectors = np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, 1), dtype=np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda handle: np.save(handle, vectors))
    return vectors

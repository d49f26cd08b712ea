"""What a run's results depend on beyond its config: the content of its collection and the code.

A run folder records :func:`run_inputs` in ``inputs.json``; a rerun into the same folder resumes
or reuses the run only when they are unchanged. A changed caption, picture, pairing or mispair
version means the old model and scores are stale: the run is trained again, and the log says why.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from mispair.data.batching import TrainingPairs
from mispair.data.mapped import row_blocks
from mispair.data.pairset import PairSet
from mispair.version import __version__

INPUTS_FILE = "inputs.json"


def run_inputs(
    splits: list[PairSet], training_pairing: np.ndarray | None, others: TrainingPairs | None = None
) -> dict[str, Any]:
    """``{"mispair": version, "data": digest}``: the digest covers every split's captions,
    image features, image ids and pairing, the training pairing (planted noise included) and the
    other splits a run scores."""
    digest = hashlib.blake2b(digest_size=16)
    for pairs in [*splits, *([others.pairs] if others is not None else [])]:
        _update(digest, pairs)
    if training_pairing is not None:
        digest.update(b"paired" + np.ascontiguousarray(training_pairing, dtype=np.int64).tobytes())
    return {"mispair": __version__, "data": digest.hexdigest()}


def _update(digest: Any, pairs: PairSet) -> None:
    digest.update(f"{len(pairs.captions)}\n".encode())
    for caption in pairs.captions:
        digest.update(caption.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(np.ascontiguousarray(pairs.image_of_caption, dtype=np.int64).tobytes())
    images = np.asarray(pairs.images)
    digest.update(f"{images.dtype}{images.shape}".encode())
    for _, block in row_blocks(images):  # a memory-mapped array is read a block at a time
        digest.update(np.ascontiguousarray(block).tobytes())
    digest.update("\0".join(map(str, pairs.image_ids or [])).encode("utf-8", "surrogateescape"))


def changed(previous: Any, current: dict[str, Any]) -> str:
    """Why ``previous`` (a folder's ``inputs.json``) differs from ``current``: "" when it does not."""
    if not isinstance(previous, dict):
        return "it records no inputs"
    if previous.get("mispair") != current["mispair"]:
        return f"mispair {previous.get('mispair')} wrote it, this is {current['mispair']}"
    if previous.get("data") != current["data"]:
        return "the collection's captions, pictures or pairing changed"
    return ""

"""Captions given as vectors (a table's text-embedding column), as token ids a batch can carry.

The batches of every recipe carry captions as padded token ids. A caption given as a vector is
written as :data:`KEY_LENGTH` ids that name the vector by its content (a digest); the vector is
kept in a process-wide table under those ids, and the ``precomputed`` text encoder reads it back
(:func:`lookup_vectors`). Equal vectors, equal ids: a caption's ids are the same in every split,
fold and process that reads the same table.

>>> import numpy as np
>>> ids = vector_tokens(np.eye(2, dtype=np.float32))
>>> lookup_vectors(ids).tolist()
[[1.0, 0.0], [0.0, 1.0]]
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from mispair.errors import DataError

KEY_LENGTH = 2
"""Token ids per caption vector (two 31-bit halves of a 62-bit digest)."""
_VECTORS: dict[tuple[int, ...], np.ndarray] = {}


def vector_key(vector: np.ndarray) -> tuple[int, ...]:
    """The :data:`KEY_LENGTH` ids (each in ``[1, 2³¹)``) naming ``vector`` by its content."""
    digest = hashlib.blake2b(np.ascontiguousarray(vector, dtype=np.float32).tobytes(), digest_size=8).digest()
    return tuple(
        int.from_bytes(digest[4 * i : 4 * i + 4], "little") % (2**31 - 1) + 1 for i in range(KEY_LENGTH)
    )


def vector_tokens(vectors: np.ndarray) -> list[list[int]]:
    """The ids of each row of ``vectors [n, D]``; the rows are kept for :func:`lookup_vectors`."""
    tokens = []
    for vector in np.asarray(vectors, dtype=np.float32):
        key = vector_key(vector)
        _VECTORS.setdefault(key, vector.copy())
        tokens.append(list(key))
    return tokens


def lookup_vectors(tokens: Sequence[Sequence[int]]) -> np.ndarray:
    """``[B, D]`` float32: the vector each caption's ids name (its first :data:`KEY_LENGTH` ids;
    padding after them is ignored)."""
    rows = []
    for ids in tokens:
        vector = _VECTORS.get(tuple(int(i) for i in ids[:KEY_LENGTH]))
        if vector is None:
            raise DataError(
                "a caption has no precomputed vector in this process: the precomputed text encoder "
                "reads the captions of a table with a text-embedding column (--text-embedding-column)"
            )
        rows.append(vector)
    return np.stack(rows)

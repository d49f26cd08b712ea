"""Precomputed vectors in a table: an image-embedding and a text-embedding column per pair.

A cell holds the vector itself (a Parquet list, a JSON list in a CSV or JSONL cell) or the path of
a ``.npy`` file holding it, relative to the table's folder (or ``data.image_root``). Every row of a
column has one dimension and finite values; the image and text columns may differ in dimension.
Anything else is a one-line error naming the row. The vectors ride along the table's rows as
float32 arrays in the columns ``image_embedding`` and ``text_embedding``.

>>> import numpy as np, pandas as pd
>>> cells = pd.Series(["[1, 2]", np.array([3.0, 4.0])])
>>> embedding_cells(cells, pd.Series(["a", "b"]), Path("."), "emb", "t.csv")[1]
array([3., 4.], dtype=float32)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mispair.errors import DataError
from mispair.sanity import feature_problem

if TYPE_CHECKING:
    import pandas as pd

EMBEDDING_FIELDS = ("image_embedding", "text_embedding")
"""The table columns that carry vectors (named by ``--image-embedding-column`` and
``--text-embedding-column``)."""


def embedding_cells(
    cells: pd.Series, ids: pd.Series, base: Path, column: str, where: str
) -> list[np.ndarray]:
    """The vector ``[D]`` float32 of every cell of the column ``column`` (``ids``: the pair id of
    each row, for messages; ``base``: the folder ``.npy`` paths are relative to)."""
    vectors: list[np.ndarray] = []
    for pair_id, cell in zip(ids, cells):
        vector = _vector(cell, base, f"{where}: pair {pair_id}: column {column!r}")
        if vectors and vector.shape != vectors[0].shape:
            raise DataError(
                f"{where}: pair {pair_id}: column {column!r} holds a vector of dimension {vector.size}, "
                f"the first row's has {vectors[0].size}; every row needs one dimension"
            )
        vectors.append(vector)
    return vectors


def _vector(cell: Any, base: Path, where: str) -> np.ndarray:
    if isinstance(cell, str):
        cell = _npy(base, cell.strip(), where) if cell.strip().endswith(".npy") else _json_list(cell, where)
    try:
        vector = np.asarray(cell, dtype=np.float32)
    except (TypeError, ValueError):
        raise DataError(f"{where}: not a vector of numbers ({type(cell).__name__})") from None
    if vector.ndim != 1 or vector.size == 0:
        raise DataError(f"{where}: a vector needs one dimension and a value, got shape {vector.shape}")
    problem = feature_problem(vector)
    if problem is not None:
        raise DataError(f"{where}: {problem}")
    return vector


def _json_list(text: str, where: str) -> Any:
    shown = text if len(text) < 40 else text[:37] + "..."
    try:
        return json.loads(text)
    except RecursionError:
        raise DataError(f"{where}: {shown!r} is nested too deep for a vector") from None
    except ValueError:
        raise DataError(f"{where}: {shown!r} is neither a list of numbers nor a .npy path") from None


def _npy(base: Path, name: str, where: str) -> np.ndarray:
    """The vector in ``base/name``: confined like a picture path (inside ``base`` once links are
    resolved), a regular file whose header is checked before it is read."""
    from mispair.safe_parse import check_npy

    path = base / name
    if "\0" in name or not path.resolve().is_relative_to(base.resolve()):
        raise DataError(f"{where}: {name!r} lies outside the collection's folder {base}")
    if not path.is_file():
        raise DataError(f"{where}: {path}: no such .npy file")
    check_npy(path)
    try:
        return np.load(path, allow_pickle=False).reshape(-1)
    except (OSError, ValueError) as exc:
        raise DataError(f"{where}: {path}: not a readable .npy array ({exc})") from None


def vector_id(vector: np.ndarray) -> str:
    """An image id naming a vector by its content: equal vectors, one image."""
    return "embedding-" + hashlib.blake2b(vector.tobytes(), digest_size=8).hexdigest()


def image_embedding_features(pairs: pd.DataFrame, images: list[str]) -> np.ndarray:
    """``[n_images, 1, D]`` float32: each image's vector (that of its first row) as the one
    fragment of its features."""
    first = pairs.drop_duplicates("image").set_index("image")["image_embedding"]
    if not images:
        return np.zeros((0, 1, 0), dtype=np.float32)
    return np.stack([first[image] for image in images])[:, None, :]

"""FAISS behind one small interface: build an inner-product index of vectors, search it, and turn
it into bytes and back (FAISS's own format, never a pickle).

:class:`IndexSpec` names the kind of index and its parameters:

- ``flat``: exact search, every vector scored (a matrix product per batch of queries);
- ``ivf``: the vectors are dealt into ``nlist`` k-means cells; a query scores the vectors of its
  ``nprobe`` nearest cells only (``nprobe = nlist`` is exact);
- ``hnsw``: a navigable small-world graph with ``m`` links per vector, built with a candidate
  list of ``ef_construction`` and searched with one of ``ef_search`` (larger: slower, closer to
  exact).

``nprobe`` and ``ef_search`` are search-time settings: the index keeps defaults and each search
may override them.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from mispair.errors import ConfigError, DataError
from mispair.limits import check_range
from mispair.options import build_dataclass

INSTALL_HINT = "search needs FAISS: pip install 'mispair[search]' (the faiss-cpu package)"


def faiss_installed() -> bool:
    """True when FAISS can be imported (without importing it)."""
    return importlib.util.find_spec("faiss") is not None


def faiss_module() -> Any:
    """The ``faiss`` module, or a one-line error saying how to install it."""
    try:
        import faiss
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return faiss


@dataclass(frozen=True)
class IndexSpec:
    """The kind of a FAISS index and its parameters (see the module docstring).

    ``nlist`` None: ``4·√n`` cells for ``n`` vectors (at most ``n``).
    """

    kind: Literal["flat", "ivf", "hnsw"] = "flat"
    nlist: int | None = None
    nprobe: int = 8
    m: int = 16
    ef_construction: int = 100
    ef_search: int = 32

    def __post_init__(self) -> None:
        for key in ("nprobe", "m", "ef_construction", "ef_search"):
            check_range(key, getattr(self, key), "--hnsw-m" if key == "m" else None)
        if self.nlist is not None:
            check_range("nlist", self.nlist)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "index") -> IndexSpec:
        """The spec of ``data`` (a manifest's), checked key by key."""
        return build_dataclass(cls, data, where)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def with_search(self, nprobe: int | None = None, ef_search: int | None = None) -> IndexSpec:
        """This spec with other search-time settings (None keeps the current one)."""
        return dataclasses.replace(
            self,
            nprobe=self.nprobe if nprobe is None else nprobe,
            ef_search=self.ef_search if ef_search is None else ef_search,
        )

    def cells(self, n_vectors: int) -> int:
        """The number of IVF cells for ``n_vectors`` vectors."""
        if self.nlist is None:
            return max(1, min(n_vectors, round(4 * math.sqrt(n_vectors))))
        if self.nlist > n_vectors:
            raise ConfigError(f"--nlist: {self.nlist} cells for {n_vectors} vectors (at most one per vector)")
        return self.nlist

    def describe(self) -> str:
        """A short label: ``exact flat``, ``ivf (nlist auto, nprobe 8)``, ``hnsw (M 16, ...)``."""
        if self.kind == "ivf":
            return f"ivf (nlist {self.nlist or 'auto'}, nprobe {self.nprobe})"
        if self.kind == "hnsw":
            return f"hnsw (M {self.m}, efConstruction {self.ef_construction}, efSearch {self.ef_search})"
        return "exact flat"


def build_ann(vectors: np.ndarray, spec: IndexSpec, *, points_per_cell: int | None = None) -> Any:
    """A FAISS inner-product index of ``vectors [n, d]`` (float32) of the kind ``spec`` names.

    ``points_per_cell``: an ``ivf`` index's k-means cells are trained on at most this many vectors
    per cell (a seeded sample; None: FAISS's 256). k-means costs ``iterations × sample × cells ×
    d``, so a million vectors in a thousand cells train in seconds on 64 a cell, in minutes on 256.
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    index = empty_ann(spec, vectors, len(vectors), points_per_cell=points_per_cell)
    index.add(vectors)
    return index


def empty_ann(
    spec: IndexSpec, sample: np.ndarray, n_vectors: int, *, points_per_cell: int | None = None
) -> Any:
    """An index of ``spec``'s kind ready for the ``n_vectors`` it will hold, added later (a block
    at a time: no copy of them all is needed): an ``ivf`` index's cells are trained on ``sample
    [m, d]`` (float32; ``points_per_cell`` as in :func:`build_ann`), the other kinds read only its
    width."""
    faiss = faiss_module()
    dim = sample.shape[1]
    if spec.kind == "ivf":
        index = faiss.IndexIVFFlat(
            faiss.IndexFlatIP(dim), dim, spec.cells(n_vectors), faiss.METRIC_INNER_PRODUCT
        )
        index.cp.min_points_per_centroid = 1  # small collections: no warning, the cells stay as asked
        if points_per_cell is not None:
            index.cp.max_points_per_centroid = points_per_cell
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
    elif spec.kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, spec.m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = spec.ef_construction
    else:
        index = faiss.IndexFlatIP(dim)
    return index


def search_ann(
    index: Any, queries: np.ndarray, k: int, spec: IndexSpec, *, among: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` highest inner products of each query: ``scores [q, k]`` (descending) and
    ``ids [q, k]`` (int64; -1 where an approximate index found fewer than ``k``); with ``among``
    (int64 ids), among those vectors only (an ``ivf`` visits the same cells)."""
    faiss = faiss_module()
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    k = max(1, min(k, index.ntotal))
    selector = None if among is None else faiss.IDSelectorBatch(np.ascontiguousarray(among, dtype=np.int64))
    params = None
    if spec.kind == "ivf":
        params = faiss.SearchParametersIVF(nprobe=spec.nprobe, sel=selector)
    elif spec.kind == "hnsw":
        params = faiss.SearchParametersHNSW(efSearch=max(spec.ef_search, k), sel=selector)
    elif selector is not None:
        params = faiss.SearchParameters(sel=selector)
    return index.search(queries, k, params=params)


def close_pairs(
    vectors: np.ndarray, squared_radius: float, *, block: int = 4096, from_row: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(i, j)`` int64 with ``i < j`` and ``j ≥ from_row``: every such pair of rows of ``vectors
    [n, d]`` at squared Euclidean distance at most ``squared_radius`` (an exact FAISS range search
    of the rows from ``from_row`` on against all, ``block`` at a time; cheap for short vectors)."""
    faiss = faiss_module()
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    index = faiss.IndexFlatL2(vectors.shape[1])
    index.add(vectors)
    radius = float(np.nextafter(np.float32(squared_radius), np.float32(np.inf)))  # FAISS keeps < radius
    first, second = [], []
    for start in range(from_row, len(vectors), block):
        lims, _, found = index.range_search(vectors[start : start + block], radius)
        rows = np.repeat(np.arange(start, start + len(lims) - 1), np.diff(lims.astype(np.int64)))
        keep = found < rows
        first.append(found[keep].astype(np.int64))
        second.append(rows[keep])
    empty = np.zeros(0, dtype=np.int64)
    return (np.concatenate(first) if first else empty), (np.concatenate(second) if second else empty)


def to_bytes(index: Any) -> bytes:
    """The index in FAISS's binary format."""
    return faiss_module().serialize_index(index).tobytes()


def from_bytes(data: bytes, where: str) -> Any:
    """The index of :func:`to_bytes`; an unreadable one is a one-line error naming ``where``."""
    faiss = faiss_module()
    try:
        return faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
    except RuntimeError as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else "unreadable"
        raise DataError(f"{where}: not a readable FAISS index ({reason})") from None

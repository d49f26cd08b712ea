"""Reading a memory-mapped feature array a block of rows at a time without keeping the file in
memory.

A page of a memory-mapped file, once read, stays in the process's resident memory until the map
is closed, so a pass over a ``[n_images, 36, 2048]`` ``.npy`` opened with ``mmap_mode="r"`` made
the audit's peak memory grow by the whole file (``benchmarks/bench_audit_scale.py``).
:func:`row_blocks` (a pass, block by block, without a copy) and :func:`rows` (picked rows,
copied) hand the map's pages back to the operating system after each block
(``madvise(MADV_DONTNEED)``: a read-only file map reads them again from the page cache when next
touched), so a pass keeps one block resident. An in-memory array is only sliced.
"""

from __future__ import annotations

import mmap
import tempfile
from collections.abc import Iterator, Sequence

import numpy as np
from numpy.typing import DTypeLike

BLOCK_BYTES = 64 << 20
"""The size of a block of :func:`row_blocks` when its rows are not given."""

FAULT_BYTES = 2 << 20
"""The most of a file map one touched row may make resident, for :func:`rows`' picked rows: a
page fault maps the pages around it that the page cache holds (fault-around, and a large folio
whole), up to a huge page. Measured: 1,024 scattered 5 KB rows of a cached 1 GB file made
850 MiB of it resident, with the copy 5 MiB."""


def row_blocks(
    array: np.ndarray, rows_per_block: int | None = None, dtype: DTypeLike = None
) -> Iterator[tuple[slice, np.ndarray]]:
    """``(rows, array[rows])`` for consecutive blocks of ``rows_per_block`` rows (default: about
    :data:`BLOCK_BYTES`), as ``dtype`` (None keeps it; a view where no conversion is needed, valid
    until the next block is asked for); the pages of a memory-mapped ``array`` are released
    after each block."""
    step = rows_per_block or _rows_per_block(array, BLOCK_BYTES)
    for start in range(0, len(array), step):
        block = slice(start, min(start + step, len(array)))
        yield block, np.asarray(array[block], dtype=dtype)
        release(array)


def rows(
    array: np.ndarray, index: slice | np.ndarray, dtype: DTypeLike = None, *, block_bytes: int = BLOCK_BYTES
) -> np.ndarray:
    """``array[index]`` as an in-memory array (of ``dtype``; None keeps it). From a memory-mapped
    ``array`` the rows are copied about ``block_bytes`` at a time and the map's pages released
    after each block (:func:`release`): picking most of a 1 GB file keeps one block of it
    resident, not the whole file beside the copy. A block of scattered rows is sized by what
    touching them maps (:data:`FAULT_BYTES` a row at most), not by the bytes copied."""
    if not _mapped(array):
        return np.array(array[index], dtype=dtype)
    picked = np.arange(*index.indices(len(array))) if isinstance(index, slice) else np.asarray(index)
    if picked.dtype == bool:
        picked = np.flatnonzero(picked)
    out = np.empty((len(picked), *array.shape[1:]), dtype=dtype or array.dtype)
    step = _rows_per_block(array, block_bytes, 1 if isinstance(index, slice) else FAULT_BYTES)
    for start in range(0, len(picked), step):
        out[start : start + step] = array[picked[start : start + step]]
        release(array)
    return out


def _rows_per_block(array: np.ndarray, block_bytes: int, least_row_bytes: int = 1) -> int:
    """The rows of ``array`` in about ``block_bytes`` (at least one), a row counted as at least
    ``least_row_bytes``."""
    return max(1, block_bytes // max(least_row_bytes, array.itemsize * int(np.prod(array.shape[1:]))))


def stacked(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """The rows of ``arrays`` one after another (one row shape; the common dtype). Where any of
    them is memory-mapped, so is the result: a read-only map of an unnamed temporary file (in
    ``TMPDIR``; the operating system removes it with the last reference), written a block at a
    time, so that joining a collection's splits never holds its features in memory (a million
    pairs' 1 GB of features were copied whole); else an in-memory ``np.concatenate``."""
    if not any(_mapped(a) for a in arrays):
        return np.concatenate([np.asarray(a) for a in arrays])
    dtype = np.result_type(*arrays)
    shape = (sum(len(a) for a in arrays), *arrays[0].shape[1:])
    with tempfile.TemporaryFile() as handle:
        for array in arrays:
            for _, block in row_blocks(array, dtype=dtype):
                handle.write(np.ascontiguousarray(block).tobytes())
        handle.flush()
        if handle.tell() == 0:  # nothing to map
            return np.zeros(shape, dtype=dtype)
        return np.memmap(handle, dtype=dtype, mode="r", shape=shape)


def _mapped(array: np.ndarray) -> bool:
    base = array
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    return base is not None


def release(array: np.ndarray) -> None:
    """Hand the resident pages of the read-only file map behind ``array`` back to the operating
    system; an array that is not memory-mapped read-only (a writable or copy-on-write map would
    lose its changes), or a platform without ``madvise``, is left alone."""
    base, mode = array, None
    while base is not None and not isinstance(base, mmap.mmap):
        mode = getattr(base, "mode", mode)  # np.memmap's access mode ("r", "r+", "c", "w+")
        base = getattr(base, "base", None)
    if base is not None and mode == "r" and hasattr(mmap, "MADV_DONTNEED") and not base.closed:
        base.madvise(mmap.MADV_DONTNEED)

"""Reading a memory-mapped feature array a block of rows at a time without keeping the file in
memory.

A page of a memory-mapped file, once read, stays in the process's resident memory until the map
is closed, so a pass over a ``[n_images, 36, 2048]`` ``.npy`` opened with ``mmap_mode="r"`` made
the audit's peak memory grow by the whole file (``benchmarks/bench_audit_scale.py``).
:func:`rows` copies a block out and hands the map's pages back to the operating system
(``madvise(MADV_DONTNEED)``: a read-only file map reads them again from the page cache when next
touched), so a pass keeps one block resident. An in-memory array is only sliced.
"""

from __future__ import annotations

import mmap

import numpy as np
from numpy.typing import DTypeLike


def rows(array: np.ndarray, index: slice | np.ndarray, dtype: DTypeLike = None) -> np.ndarray:
    """``array[index]`` as an in-memory array (of ``dtype``; None keeps it); the pages of a
    memory-mapped ``array`` are released after the copy (:func:`release`)."""
    block = np.array(array[index], dtype=dtype)
    release(array)
    return block


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

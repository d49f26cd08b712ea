"""Keep-lists for pipelines, written beside every cleaned collection.

``keep_keys.txt``: the kept pair ids, one per line, in the order of ``keep.csv`` (a WebDataset
sample's ``shard/key``, a table's id column or row number, a COCO annotation id). ``uids.npy``,
where every kept id (a WebDataset key without its shard) is an integer or a hexadecimal uid: the
sorted array a DataComp-style filtering pipeline reads — 32-digit hexadecimal uids as DataComp
writes them (``np.dtype("u8,u8")``: the uid's first and last 16 hex digits as two unsigned
64-bit integers, sorted), decimal integers as a sorted ``uint64`` array.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mispair.atomic import atomic_text, atomic_write

KEEP_LISTS = ("keep_keys.txt", "uids.npy")
HEX_UID = re.compile(r"^[0-9a-fA-F]{32}$")
DECIMAL = re.compile(r"^[0-9]{1,19}$")


def write_keep_lists(folder: Path, kept_ids: Sequence[str], *, shard_keys: bool = False) -> list[str]:
    """``keep_keys.txt`` (and ``uids.npy`` when the ids are uids) in ``folder``; the names written.
    ``shard_keys``: the ids are ``shard/key`` (the uid is the key)."""
    ids = [str(i) for i in kept_ids]
    atomic_text(folder / "keep_keys.txt", "".join(f"{i}\n" for i in ids))
    uids = datacomp_uids([i.rpartition("/")[2] if shard_keys else i for i in ids])
    if uids is None:
        return ["keep_keys.txt"]
    atomic_write(folder / "uids.npy", lambda handle: np.save(handle, uids))
    return list(KEEP_LISTS)


def datacomp_uids(ids: Sequence[str]) -> np.ndarray | None:
    """The sorted uid array of ``ids`` (see the module's description), or None when they are not
    all uids of one kind."""
    if ids and all(HEX_UID.match(i) for i in ids):
        pairs = [(int(i[:16], 16), int(i[16:], 16)) for i in ids]
        return np.sort(np.array(pairs, dtype=np.dtype("u8,u8")))
    if ids and all(DECIMAL.match(i) and int(i) < 2**64 for i in ids):
        return np.sort(np.array([int(i) for i in ids], dtype=np.uint64))
    return None

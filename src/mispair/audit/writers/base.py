"""What every writer of a cleaned collection is given and returns.

A writer turns the collection an audit read into its cleaned copy, in the collection's own form:
it reads the input again (never trusting the audit for anything but the decisions), keeps the
rows or samples whose pair id :class:`Decided` keeps, writes a replaced caption where one was
decided, and copies everything else as it was read. Pair ids are computed exactly as the reader
computes them (the id column, else the row number from 0; ``shard/key``; the annotation id), so
a pair id the audit never saw (a row the audit refused) is left out, as it is from ``keep.csv``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mispair.data.readers.columns import Columns
from mispair.errors import DataError


@dataclass(frozen=True)
class Decided:
    """The outcome of the decisions: ``kept`` maps every kept pair id to its new caption (None:
    unchanged); a pair id not in it is dropped."""

    kept: dict[str, str | None]

    def keeps(self, pair_id: str) -> bool:
        return pair_id in self.kept

    def caption(self, pair_id: str) -> str | None:
        """The new caption of a kept pair (None: the caption stays)."""
        return self.kept.get(pair_id)


@dataclass
class WriteRequest:
    """What a writer needs: the input ``collection`` (a file, a folder or a shard pattern), the
    ``columns`` the audit read it with, the ``decided`` pairs, and ``link_pictures`` (puts the
    kept pairs' picture files into a folder at their image ids, as apply checks them, refusing a
    picture named like one of the files the writer wrote there, its second argument; returns
    ``{"linked": n, "copied": m}``) for the forms that keep pictures beside their captions.
    ``shard_bytes`` bounds an output shard (WebDataset; None: one output shard per input shard)."""

    collection: Path
    columns: Columns
    decided: Decided
    link_pictures: Callable[[Path, list[str]], dict[str, int]]
    shard_bytes: int | None = None


@dataclass
class Written:
    """What a writer wrote into the output folder: its ``files`` (relative names), rows or
    samples ``read`` and ``kept``, captions ``replaced``, picture files ``linked`` and ``copied``."""

    files: list[str] = field(default_factory=list)
    read: int = 0
    kept: int = 0
    replaced: int = 0
    linked: int = 0
    copied: int = 0

    def add(self, other: Written) -> Written:
        self.files += other.files
        self.read += other.read
        self.kept += other.kept
        self.replaced += other.replaced
        self.linked += other.linked
        self.copied += other.copied
        return self


APPLY_NAMES = ("keep.csv", "removed.csv", "keep_keys.txt", "uids.npy", ".mispair-output")
"""What apply writes beside every cleaned collection."""


def own_name(collection: Path) -> None:
    """A collection file named like one of apply's reports would be overwritten by it: refused."""
    if collection.name in APPLY_NAMES:
        raise DataError(
            f"{collection}: the collection's file is named like a file apply writes beside it "
            f"({', '.join(APPLY_NAMES)}); rename it and audit again, or give --format folder"
        )


def cell_text(value: object) -> str:
    """A table cell as the readers make it text (None and NaN empty; numbers as ``str``)."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return value if isinstance(value, str) else str(value)


def new_file(path: Path, mode: str = "wb", **options):
    """``path`` opened for writing as a new regular file: an earlier regular file there is
    replaced; a link, a folder or anything else (planted in an output folder) is refused, and the
    file is created exclusively (no link is followed)."""
    import os

    for folder in [path.parent, *path.parent.parents]:
        if folder.is_symlink():
            raise DataError(f"{folder}: a link in the output; remove it")
    if path.is_symlink() or (os.path.lexists(path) and not path.is_file()):
        raise DataError(f"{path}: not a regular file in the output; remove it")
    if path.exists():
        path.unlink()
    return open(path, mode.replace("w", "x"), **options)

"""The reader registry: one reader per form a collection is kept in.

A reader knows its form on sight (:meth:`Reader.detect`), lists the splits it holds and reads one
of them as a :class:`~mispair.data.pairset.PairSet`. ``data.source`` names a reader, or ``auto``:
the first reader (in :attr:`Reader.priority` order) that recognises ``data.root``. Adding a form
is adding one module to this package that registers a :class:`Reader` subclass.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from mispair.registry import Registry

if TYPE_CHECKING:
    import pandas as pd

    from mispair.config import DataConfig
    from mispair.data.pairset import PairSet


class Reader:
    """How one form of collection is read (subclasses override what differs).

    Attributes:
        name: the ``data.source`` value that picks it.
        priority: detection order under ``auto`` (lower first).
        describes: what the form is, for messages and ``docs/collections.md``.
    """

    name: ClassVar[str]
    priority: ClassVar[int] = 50
    describes: ClassVar[str] = ""

    def detect(self, path: Path) -> bool:
        """Whether ``path`` holds a collection of this form."""
        return False

    def splits(self, data: DataConfig) -> list[str]:
        """The splits present, in the order train, dev, test."""
        return [data.train_split, data.dev_split, data.test_split]

    def read_split(self, data: DataConfig, split: str) -> PairSet:
        """One split as a :class:`PairSet` (pair ids set when the form has them)."""
        raise NotImplementedError

    def cache_dir(self, data: DataConfig) -> Path | None:
        """Where derived files (image features, a frozen text encoder's outputs) are kept, or
        None (memory only): the user's cache folder
        (:func:`~mispair.data.cache_folder.collection_cache`), never inside the collection."""
        return None

    def old_cache_dirs(self, data: DataConfig) -> list[Path]:
        """Caches an older mispair wrote beside the data: read when they hold what is asked,
        never written."""
        return []

    def picture_dirs(self, data: DataConfig) -> list[Path]:
        """Folders to look for the picture files behind the image ids (the report's thumbnails)."""
        return [Path(data.root)] if data.root else []

    def refused(self, data: DataConfig) -> pd.DataFrame | None:
        """The input rows that could not be read, each with its ``reason`` (None: none)."""
        return None

    def split_note(self, data: DataConfig) -> str | None:
        """A line saying where the splits came from when the collection did not name them."""
        return None

    def natural_noise(self, data: DataConfig) -> object | None:
        """Known mismatch labels of the training split shipped with the collection, or None."""
        return None


READERS: Registry[type[Reader]] = Registry("collection reader", "data.source", "mispair.data.readers")
"""Readers by name (``data.source``); each module of this package registers one."""


def reader_of(data: DataConfig) -> Reader:
    """The reader ``data.source`` names (``auto`` resolved by :func:`detect_source`)."""
    return READERS.get(data.source)()

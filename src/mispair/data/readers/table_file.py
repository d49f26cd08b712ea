"""A table file (``.csv``, ``.tsv``, ``.jsonl``, ``.parquet``) with an image and a caption column;
image paths relative to the table's folder (or ``data.image_root``), or the image bytes in the
column (see :mod:`mispair.data.readers.files`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mispair.data.readers.base import READERS
from mispair.data.readers.columns import columns_of
from mispair.data.readers.files import TABLE_SUFFIXES, frame_table, read_frame
from mispair.data.readers.table import CollectionTable, TableReader

if TYPE_CHECKING:
    from mispair.config import DataConfig


@READERS.register("table")
class TableFileReader(TableReader):
    name = "table"
    priority = 30
    describes = "a .csv, .tsv, .jsonl or .parquet file with image and caption columns"

    def detect(self, path: Path) -> bool:
        return path.is_file() and path.suffix.lower() in TABLE_SUFFIXES

    def table(self, data: DataConfig) -> CollectionTable:
        path = Path(data.root)
        return frame_table(
            read_frame(path),
            columns_of(data),
            Path(data.image_root or path.parent),
            self.cache_dir(data),
            str(path),
        )

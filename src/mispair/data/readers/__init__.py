"""Readers of collections in the forms people keep them (see ``docs/collections.md``).

>>> from mispair.data.readers import detect_source
>>> detect_source("captions.parquet")        # doctest: +SKIP
'table'
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mispair.data.readers.base import READERS, Reader, reader_of
from mispair.data.readers.columns import Columns
from mispair.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["READERS", "Columns", "Reader", "dataframe_table", "detect_source", "reader_of"]


def detect_source(path: str | Path) -> str:
    """The name of the reader that recognises ``path`` (the first by priority), or a one-line
    error naming every accepted form."""
    path = Path(path)
    readers = sorted((READERS.get(name)() for name in READERS.names()), key=lambda r: r.priority)
    for reader in readers:
        if reader.detect(path):
            return reader.name
    if not path.exists() and "{" not in str(path):
        raise DataError(f"{path}: no such file or folder")
    forms = "; ".join(r.describes for r in readers if r.name != "synthetic")
    raise DataError(f"{path}: not a collection mispair reads (accepted: {forms})")


def dataframe_table(
    frame: pd.DataFrame, columns: Columns | None = None, base: str | Path = "."
) -> pd.DataFrame:
    """``frame`` ready to be saved as a Parquet table: string image paths made absolute (relative
    ones from ``base``), other columns as they are (``columns``: the columns named, if any)."""
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise DataError(f"a pandas DataFrame is needed, got {type(frame).__name__}")
    frame = frame.reset_index(drop=True).copy()
    frame.columns = [str(c) for c in frame.columns]
    base = Path(base).resolve()
    image = (columns or Columns()).resolve(list(frame.columns), "the DataFrame").image
    if image is None:  # images given as vectors only
        return frame
    frame[image] = frame[image].map(
        lambda v: str(base / v) if isinstance(v, (str, Path)) and v and "://" not in str(v) else v
    )
    return frame

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
    twice = [c for c in dict.fromkeys(frame.columns) if list(frame.columns).count(c) > 1]
    if twice:
        raise DataError(f"the DataFrame: column {twice[0]!r} appears more than once; rename one")
    base = Path(base).resolve()
    names = (columns or Columns()).resolve(list(frame.columns), "the DataFrame")
    vectors = {names.image_embedding, names.text_embedding} - {None}
    for name in frame.columns:
        if name not in vectors and name != names.image and frame[name].dtype == object:
            frame[name] = [_text(v, name, k) for k, v in enumerate(frame[name])]
    image = names.image
    if image is None:  # images given as vectors only
        return frame
    frame[image] = [_image(v, base, k) for k, v in enumerate(frame[image])]
    kinds = {type(v).__name__ for v in frame[image] if v is not None and v == v}
    if len(kinds) > 1:
        raise DataError(
            f"the DataFrame: column {image!r} mixes {' and '.join(sorted(kinds))} cells; give every "
            "picture as a path, or every picture as image bytes"
        )
    return frame


def _text(value: object, column: str, row: int) -> object:
    """A text cell of a DataFrame as text: bytes decoded as UTF-8 (a caption of bytes is its text,
    not ``b'...'``), numbers and other values written out, missing values kept missing."""
    if value is None or isinstance(value, str) or (isinstance(value, float) and value != value):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise DataError(
                f"the DataFrame: column {column!r}, row {row}: bytes that are not UTF-8 text"
            ) from None
    return str(value)


def _image(value: object, base: Path, row: int) -> object:
    """An image cell: a path made absolute (relative ones from ``base``), a PIL image as the PNG
    struct the ``datasets`` library writes, image bytes and structs as they are."""
    if isinstance(value, (str, Path)):
        return str(base / value) if value and "://" not in str(value) else str(value)
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": bytes(value), "path": None}
    if type(value).__module__.startswith("PIL."):
        import io

        buffer = io.BytesIO()
        try:
            value.save(buffer, format="PNG")  # type: ignore[attr-defined]
        except (OSError, ValueError) as exc:
            raise DataError(
                f"the DataFrame: row {row}: a picture that cannot be saved as PNG ({exc})"
            ) from None
        return {"bytes": buffer.getvalue(), "path": None}
    if isinstance(value, dict) or value is None or (isinstance(value, float) and value != value):
        return value
    raise DataError(
        f"the DataFrame: row {row}: an image cell of type {type(value).__name__} (a path, image bytes, "
        "a PIL image or a {'bytes', 'path'} struct expected)"
    )

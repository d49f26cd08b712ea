"""What the notebook functions (``mispair.audit``, ``mispair.train``) share: a source given as a
path or a DataFrame, keyword options as config overrides, and silence when asked."""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.errors import ConfigError
from mispair.progress import is_quiet, set_quiet

if TYPE_CHECKING:
    import pandas as pd

COLUMN_OPTIONS = (
    "image_column",
    "caption_column",
    "id_column",
    "split_column",
    "image_embedding_column",
    "text_embedding_column",
)
"""Keyword arguments naming a table's columns (``data.<name>`` in a config; the first four
auto-detected when not given)."""
DATA_KEYWORDS = (*COLUMN_OPTIONS, "image_root", "cache_dir", "embeddings_aligned", "encoder_runtime")
"""Keyword arguments that are ``data.<name>`` fields."""


def keyword_overrides(options: Mapping[str, Any]) -> list[str]:
    """``key=value`` overrides of keyword options: column names go to ``data.<name>``, mappings
    are flattened (``train={"epochs": 5}`` → ``train.epochs=5``)."""
    import json

    flat: list[str] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                walk(f"{prefix}.{key}", inner)
        else:
            flat.append(f"{prefix}={json.dumps(value)}")

    for key, value in options.items():
        walk(f"data.{key}" if key in DATA_KEYWORDS else key, value)
    return flat


def source_path(
    source: str | Path | pd.DataFrame, out: Path, options: Mapping[str, Any]
) -> tuple[Path, list[str]]:
    """A path the readers open, and the overrides it needs: ``source`` itself, or a DataFrame
    written as ``out/input.parquet`` with its relative image paths made absolute (from the working
    folder), read with its image paths outside ``out`` allowed (they are the caller's own)."""
    if isinstance(source, (str, Path)):
        return Path(source), []
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        raise ConfigError("a DataFrame source needs pandas (pip install pandas)") from None
    if not isinstance(source, pd.DataFrame):
        raise ConfigError(f"source: a path or a pandas DataFrame, got {type(source).__name__}")
    from mispair.data.readers import Columns, dataframe_table

    columns = Columns(*(options.get(name) for name in COLUMN_OPTIONS))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "input.parquet"
    dataframe_table(source, columns).to_parquet(path, index=False)
    return path, ["data.folder_allow_outside=true"]


def silent(_: str) -> None:
    """A log that says nothing."""


@contextlib.contextmanager
def quiet_unless(progress: bool) -> Iterator[list[str]]:
    """With ``progress`` False: no progress bar, nothing on standard output or error, the
    warnings collected into the yielded list instead."""
    caught: list[str] = []
    if progress:
        yield caught
        return
    with (
        warnings.catch_warnings(record=True) as records,
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("always")
        was_quiet = is_quiet()
        set_quiet(True)
        try:
            yield caught
        finally:
            set_quiet(was_quiet)
            caught.extend(str(r.message) for r in records)

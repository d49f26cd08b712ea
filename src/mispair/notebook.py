"""What the notebook functions (``mispair.audit``, ``mispair.train``) share: a source given as a
path or a DataFrame, keyword options as config overrides, and silence when asked."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.errors import ConfigError, DataError
from mispair.progress import is_quiet, set_quiet

if TYPE_CHECKING:
    import pandas as pd
    from datasets import Dataset, DatasetDict

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
INPUT_FILE = "input.parquet"
"""The file a DataFrame source is written to in the output folder."""
DATA_KEYWORDS = (*COLUMN_OPTIONS, "image_root", "cache_dir", "embeddings_aligned", "encoder_runtime")
"""Keyword arguments that are ``data.<name>`` fields."""


def keyword_overrides(options: Mapping[str, Any]) -> list[str]:
    """``key=value`` overrides of keyword options: column names go to ``data.<name>``, mappings
    are flattened (``train={"epochs": 5}`` → ``train.epochs=5``)."""
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
    source: str | Path | pd.DataFrame | Dataset | DatasetDict, out: Path, options: Mapping[str, Any]
) -> tuple[Path, list[str]]:
    """A path the readers open, and the overrides it needs: ``source`` itself, a Hugging Face
    ``Dataset`` or ``DatasetDict`` saved as ``out/input_dataset`` (its pictures known by path are
    the caller's own, read wherever they lie), or a DataFrame
    written as ``out/input.parquet`` with its relative image paths made absolute — resolved
    against ``options["image_root"]`` when given (a folder; itself relative to the working
    folder), else against the working folder — read with its image paths outside ``out`` allowed
    (they are the caller's own)."""
    if isinstance(source, (str, Path)):
        return Path(source), []
    from mispair.data.readers.hf_dataset import is_dataset_object, save_input

    if is_dataset_object(source):  # a Hugging Face Dataset: saved as out/input_dataset, read as one
        return save_input(source, out), ["data.folder_allow_outside=true"]
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        raise ConfigError("a DataFrame source needs pandas (pip install pandas)") from None
    if not isinstance(source, pd.DataFrame):
        raise ConfigError(f"source: a path or a pandas DataFrame, got {type(source).__name__}")
    from mispair.data.readers import Columns, dataframe_table

    columns = Columns(*(options.get(name) for name in COLUMN_OPTIONS))
    base = Path(options.get("image_root") or ".").expanduser().resolve()
    if not base.is_dir():
        raise ConfigError(
            f"image_root={options['image_root']!r}: no such folder (the DataFrame's relative "
            "picture paths are resolved against it)"
        )
    table = dataframe_table(source, columns, base=base)
    out.mkdir(parents=True, exist_ok=True)
    try:
        table.to_parquet(out / INPUT_FILE, index=False)
    except (ValueError, TypeError, OverflowError) as exc:  # pyarrow's errors derive from these
        (out / INPUT_FILE).unlink(missing_ok=True)
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise DataError(f"the DataFrame: a column pyarrow cannot store ({first})") from None
    return out / INPUT_FILE, ["data.folder_allow_outside=true"]


@contextlib.contextmanager
def as_before_on_failure(out: Path, *, new: bool = False, replacing: bool = False) -> Iterator[None]:
    """Leave the folder ``out`` as it was when the block fails (an error; an interrupted run
    keeps its folder, to resume): removed when the block made it (or ``new``: the caller just
    made it), else without the entries the block added, and with its ``input.parquet`` as it was
    (``replacing``: the block writes a new one; the old one waits beside it until it succeeds).
    A folder another mispair run holds is refused first, with nothing in it touched."""
    _refuse_in_use(out)
    made = new or not out.exists()
    before = set() if made or not out.is_dir() else {p.name for p in out.iterdir()}
    kept = out / f".{INPUT_FILE}.before"
    if replacing and INPUT_FILE in before and (out / INPUT_FILE).is_file():
        os.replace(out / INPUT_FILE, kept)
    try:
        yield
    except Exception:
        if made:
            shutil.rmtree(out, ignore_errors=True)
        elif out.is_dir():
            for entry in out.iterdir():
                if entry.name not in before and entry != kept:
                    _remove(entry)
            if kept.is_file():
                os.replace(kept, out / INPUT_FILE)
        raise
    if kept.is_file():
        if (out / INPUT_FILE).is_file():
            kept.unlink()
        else:
            os.replace(kept, out / INPUT_FILE)


def _refuse_in_use(out: Path) -> None:
    lock = out / ".mispair.lock"
    if lock.is_symlink() or not lock.is_file():
        return  # (a link there is refused by the run itself)
    import fcntl

    from mispair.safe_io import open_lock

    with open_lock(lock) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = handle.read().strip() or "unknown"
            raise DataError(
                f"{out}: in use by another mispair run (process {holder}); wait for it or choose another out"
            ) from None
        fcntl.flock(handle, fcntl.LOCK_UN)


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        entry.unlink(missing_ok=True)


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

"""An audit folder read back as untrusted input: one validated loader for ``summary.json``,
``pairs.parquet``, ``refused.csv`` and ``report.html``.

Audit folders are shared: one person audits, another applies the decisions. Whatever is read
back is checked before it is used, as a collection is: each file a regular file (no link, FIFO or
device) within its size bound; the summary bounded JSON with the fields ``apply`` uses of the
right types; the pairs' row count bounded from the Parquet metadata before a row is decoded, one
row group at a time, with the columns and types the audit writes; every image id a plain
relative name inside the image root (no ``..``, no NUL, no absolute path outside it); the image
root a real folder, not the file system's root. The audit's run is the folder's own ``run/``,
whatever path the summary records (the folder may have been moved, or the path altered), and its
``config.json`` (:func:`read_run_data`: what ``apply`` writes the collection's own form from) a
regular bounded file that names the same collection as the summary. Anything else is one
:class:`~mispair.errors.DataError` naming the file. Older summaries (before ``calibration``) and
pairs without ``q_value`` are read as they are.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from mispair.errors import DataError
from mispair.limits import limit, raise_hint
from mispair.safe_io import read_input
from mispair.safe_parse import load_json, read_parquet_bounded

if TYPE_CHECKING:
    import pandas as pd

SUMMARY_TYPES: dict[str, tuple[type, ...]] = {
    "collection": (str,),
    "image_root": (str, type(None)),
    "pictures": (str, type(None)),
    "audit_id": (str, type(None)),
    "run": (str, type(None)),
    "split_note": (str, type(None)),
    "planted": (int, float, type(None)),
    "threshold": (int, float),
    "pairs": (int,),
    "calibration": (dict, type(None)),
}
"""The summary fields that are read back, with their types (``collection`` and ``threshold``
are required; the rest may be missing, as in older audits)."""
REQUIRED = ("collection", "threshold")
RUN_FOLDER = "run"
"""The audit's run, inside its folder (``mispair audit`` trains it in ``out/run``)."""
RUN_DATA_KEYS = (
    "source",
    "root",
    "image_root",
    "image_column",
    "caption_column",
    "id_column",
    "split_column",
)
"""The fields of the run config's ``data`` section that are read back (each text or None)."""
PAIR_COLUMNS = ("pair_id", "image_id", "caption", "mismatch_probability")
PATH_CHARS = 4096


@dataclass
class AuditFolder:
    """The checked content of an audit folder."""

    pairs: pd.DataFrame
    summary: dict[str, Any]
    report: str
    refused: pd.DataFrame | None


def read_audit_folder(folder: str | Path) -> AuditFolder:
    """The audit saved in ``folder``, every file checked (see the module's description).

    Raises:
        DataError: not a finished audit folder, or a file of it damaged, tampered or too large.
    """
    folder = Path(folder)
    summary_path, pairs_path = folder / "summary.json", folder / "pairs.parquet"
    if not folder.is_dir() or not os.path.lexists(summary_path) or not os.path.lexists(pairs_path):
        raise DataError(
            f"{folder}: not a finished audit folder (no summary.json and pairs.parquet); "
            "give the --out folder of `mispair audit`"
        )
    summary = read_summary(summary_path)
    pairs = read_pairs(pairs_path, summary)
    report = _optional_text(folder / "report.html", "MAX_TABLE_BYTES")
    refused = _refused(folder / "refused.csv")
    return AuditFolder(pairs, summary, report, refused)


def read_summary(path: Path) -> dict[str, Any]:
    """``summary.json``: bounded JSON, an object whose fields of :data:`SUMMARY_TYPES` have their
    types, a threshold in [0, 1], absolute paths without NUL."""
    bound = limit("MAX_SUMMARY_BYTES")
    data = read_input(path, bound, "an audit's summary", hint=raise_hint("MAX_SUMMARY_BYTES"), links=False)
    return check_summary(own_run(load_json(data, path), path.parent), path)


def own_run(summary: Any, folder: Path) -> Any:
    """``summary`` with its ``run`` the audit ``folder``'s own ``run/``: the path recorded is only
    where the audit was written, and is never opened (a moved folder keeps its run; an altered
    path reaches nothing outside the folder). A summary without a run stays without one."""
    if isinstance(summary, dict) and isinstance(summary.get("run"), str):
        return {**summary, "run": str(Path(folder).resolve() / RUN_FOLDER)}
    return summary


def read_run_data(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``data`` section of the audit's run config (``<run>/config.json``), read as untrusted
    input: the run a real folder named ``run`` (no link), the config a regular file within
    ``MAX_CONFIG_BYTES``, its fields of :data:`RUN_DATA_KEYS` text or None, and its ``data.root``
    the collection ``summary`` names. None when the audit has no run config (none recorded, or
    an audit folder copied without its run).

    Raises:
        DataError: the run or its config is not what the audit writes, or names another
            collection (a damaged or tampered audit).
    """
    if not summary.get("run"):
        return None
    run = Path(summary["run"])
    config = run / "config.json"
    if not os.path.lexists(run):
        return None
    if run.name != RUN_FOLDER or run.is_symlink() or not run.is_dir():
        raise DataError(
            f"{run}: the audit's run is not its own run folder (a real folder named {RUN_FOLDER!r} "
            "in the audit's folder); a damaged or tampered audit, audit the collection again"
        )
    if not os.path.lexists(config):
        return None
    bound = "MAX_CONFIG_BYTES"
    text = read_input(config, limit(bound), "a run config", hint=raise_hint(bound), links=False)
    loaded = load_json(text, config)
    data: Any = loaded.get("data") if isinstance(loaded, dict) else None
    text_fields = isinstance(data, dict) and all(
        isinstance(data.get(k), (str, type(None))) for k in RUN_DATA_KEYS
    )
    if not text_fields:
        raise DataError(
            f"{config}: no data section with text fields {', '.join(RUN_DATA_KEYS)}; a damaged or "
            "tampered run config, audit the collection again"
        )
    root, collection = data.get("root"), str(summary["collection"])
    if not root or "\0" in root or Path(root).resolve() != Path(collection).resolve():
        raise DataError(
            f"{config}: the audit's run read the collection {_short(root)}, but summary.json names "
            f"{_short(collection)}; the files are of different audits (or one was altered)"
        )
    return data


def check_summary(summary: Any, path: object) -> Any:
    """``summary`` (a mapping: the JSON object, or a typed summary read through the same keys)
    when it is an audit summary whose fields of :data:`SUMMARY_TYPES` have their types (``path``
    names it in the error)."""
    if not isinstance(summary, Mapping):
        raise DataError(f"{path}: not an audit summary (a JSON object); audit the collection again")
    for name in REQUIRED:
        if name not in summary:
            raise DataError(
                f"{path}: no field {name!r}; a damaged or tampered summary, audit the collection again"
            )
    for name, types in SUMMARY_TYPES.items():
        value = summary.get(name)
        if name in summary and (not isinstance(value, types) or isinstance(value, bool)):
            raise DataError(
                f"{path}: field {name!r} is {type(value).__name__} {_short(value)}, expected "
                f"{' or '.join(t.__name__ for t in types if t is not type(None))}; a damaged or "
                "tampered summary, audit the collection again"
            )
    threshold = summary["threshold"]
    if not (math.isfinite(threshold) and 0 <= threshold <= 1):
        raise DataError(f"{path}: threshold {threshold!r} is not a probability in [0, 1]")
    for name in ("collection", "image_root", "pictures", "run"):
        value = summary.get(name)
        if value is not None and ("\0" in value or len(value) > PATH_CHARS or not Path(value).is_absolute()):
            raise DataError(f"{path}: field {name!r} is not an absolute path ({_short(value)})")
    return summary


def read_pairs(path: Path, summary: dict[str, Any]) -> pd.DataFrame:
    """``pairs.parquet``: its rows bounded from the metadata, its columns of the types the audit
    writes, one row per pair id, every image id a plain name inside the image root."""
    return check_pairs(read_parquet_bounded(path, "an audit's pairs", links=False), summary, path)


SCORED_COLUMNS = ("pair_id", "mismatch_probability", "suspected", "held_out_score")
"""What an estimate reads of ``pairs.parquet`` (:func:`read_scored_pairs`)."""


def read_scored_pairs(path: Path, summary: dict[str, Any]) -> pd.DataFrame:
    """The columns :data:`SCORED_COLUMNS` of ``pairs.parquet``, checked as :func:`read_pairs`
    checks them (bounded; text ids, each once; probabilities in [0, 1]; as many as the summary
    counts), without reading the captions and names an estimate does not need."""
    frame = read_parquet_bounded(path, "an audit's pairs", links=False, columns=SCORED_COLUMNS)
    for column in ("pair_id", "mismatch_probability"):
        if column not in frame.columns:
            raise DataError(
                f"{path}: no column {column!r}; a damaged or tampered audit, audit the collection again"
            )
    _text_column(frame, "pair_id", path)
    _probability_column(frame, "mismatch_probability", path)
    if not frame["pair_id"].is_unique:
        twice = frame["pair_id"][frame["pair_id"].duplicated()]
        raise DataError(f"{path}: pair {twice.iloc[0]!r} appears more than once; a damaged or tampered audit")
    if isinstance(summary.get("pairs"), int) and summary["pairs"] != len(frame):
        raise DataError(f"{path}: {len(frame):,} pairs, but summary.json counts {summary['pairs']:,}")
    return frame


def check_pairs(frame: pd.DataFrame, summary: dict[str, Any], path: object) -> pd.DataFrame:
    """``frame`` when it holds an audit's pairs as :func:`read_pairs` says (``path`` names it in
    the error; numeric pair ids become text)."""
    import pandas as pd

    missing = [c for c in PAIR_COLUMNS if c not in frame.columns]
    if missing:
        raise DataError(
            f"{path}: no column {missing[0]!r}; a damaged or tampered audit, audit the collection again"
        )
    for column in ("pair_id", "image_id", "caption", "true_image_id", "split"):
        if column in frame.columns:
            _text_column(frame, column, path)
    for column in ("mismatch_probability", "q_value"):
        if column in frame.columns:
            _probability_column(frame, column, path)
    if "split" not in frame.columns:  # an older or hand-made audit: no split named
        frame["split"] = ""
    twice = frame["pair_id"][frame["pair_id"].duplicated()]
    if len(twice):
        raise DataError(f"{path}: pair {twice.iloc[0]!r} appears more than once; a damaged or tampered audit")
    if isinstance(summary.get("pairs"), int) and summary["pairs"] != len(frame):
        raise DataError(
            f"{path}: {len(frame):,} pairs, but summary.json counts {summary['pairs']:,}; the two "
            "files are of different audits (or one was altered)"
        )
    root = summary.get("image_root")
    for column in ("image_id", "true_image_id"):
        if column in frame.columns:
            ids = pd.Series(frame[column].unique())
            suspect = (
                ids.str.startswith("/")
                | ids.str.contains(r"(?:^|/)\.\.(?:/|$)|[\x00\\]", regex=True)
                | (ids.str.len() > PATH_CHARS)
                | ids.isin(["", "."])
            )
            for image in ids[suspect]:  # the rest are plain relative names already
                plain_name(image, root, f"{path}: image id")
    return frame


def plain_name(image: str, root: str | Path | None, where: str) -> str:
    """``image`` as a relative POSIX path inside ``root``: a plain relative name (no ``..``, no
    empty or NUL part), or an absolute path that lies below ``root`` (a DataFrame's pictures),
    given as the relative name. Anything else is a :class:`DataError` starting with ``where``."""
    bad = not image or "\0" in image or len(image) > PATH_CHARS or "\\" in image
    name = PurePosixPath(image)
    if not bad and name.is_absolute():
        base = PurePosixPath(os.path.normpath(str(root))) if root is not None else None
        inside = base is not None and PurePosixPath(os.path.normpath(image)).is_relative_to(base)
        if not inside or ".." in name.parts:
            raise DataError(f"{where} {_short(image)} is an absolute path outside the collection")
        name = PurePosixPath(os.path.normpath(image)).relative_to(base)  # type: ignore[arg-type]
    if bad or ".." in name.parts or str(name) in ("", ".") or name.is_absolute():
        raise DataError(
            f"{where} {_short(image)} is not a plain relative name inside the collection (a "
            "damaged or tampered audit)"
        )
    return name.as_posix()


def _text_column(frame: pd.DataFrame, column: str, path: object) -> None:
    import pandas as pd

    values = frame[column]
    if isinstance(values.dtype, pd.StringDtype) and not values.isna().any():
        return  # a string column: every value is text (checked without a call per value)
    wrong = values[~values.map(lambda v: isinstance(v, str))]
    if len(wrong) and column == "pair_id" and all(isinstance(v, int) for v in wrong):
        frame[column] = values.astype(str)  # numeric pair ids: the same ids as text
        return
    if len(wrong) and not (column == "split" and wrong.isna().all()):
        raise DataError(
            f"{path}: column {column!r} holds {type(wrong.iloc[0]).__name__} values (e.g. "
            f"{_short(wrong.iloc[0])}), expected text; a damaged or tampered audit"
        )


def _probability_column(frame: pd.DataFrame, column: str, path: object) -> None:
    import numpy as np
    import pandas as pd

    values = frame[column]
    if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        raise DataError(
            f"{path}: column {column!r} is not numeric ({values.dtype}); a damaged or tampered audit"
        )
    numbers = values.to_numpy(dtype=np.float64)
    outside = ~np.isnan(numbers) & ((numbers < 0) | (numbers > 1))
    if outside.any():
        raise DataError(
            f"{path}: column {column!r} holds {numbers[outside][0]!r}, not a probability in [0, 1]; "
            "a damaged or tampered audit"
        )


def _optional_text(path: Path, bound_name: str) -> str:
    if not os.path.lexists(path):
        return ""
    data = read_input(path, limit(bound_name), "an audit's report", hint=raise_hint(bound_name), links=False)
    return data.decode("utf-8", errors="replace")


def _refused(path: Path) -> pd.DataFrame | None:
    import io

    import pandas as pd

    if not os.path.lexists(path):
        return None
    data = read_input(path, limit("MAX_TABLE_BYTES"), "an audit's refused rows", links=False)
    try:
        return pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable CSV file ({type(exc).__name__})") from None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."

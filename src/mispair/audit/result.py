"""What an audit gives back: every pair ranked (a pandas DataFrame), the summary, the report."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.atomic import atomic_text, atomic_write
from mispair.audit.thumbs import THUMBS
from mispair.engine.export import spreadsheet_safe
from mispair.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

OUTPUTS = ("summary.json", "report.html", "pairs.js", "pairs.csv", "pairs.parquet", "refused.csv")
"""What the audit writes into its folder (``summary.json`` last: its presence means complete)."""


@dataclass
class AuditResult:
    """An audit of a collection.

    Attributes:
        pairs: one row per input pair, from the most suspect to the least: ``pair_id`` (stable:
            the input row or the id column), ``rank``, ``split``, ``image_id``, ``caption``,
            ``mismatch_probability``, ``suspected``, ``held_out_score`` (the score of the models
            that never trained on the pair; lower = more suspect), ``pair_similarity``, the
            suggested caption and image, and the truth when the audit planted swaps.
        summary: what ``summary.json`` holds (counts, the estimated mismatched share with its
            interval, the self-check, retrieval figures).
        report: the ``report.html`` page.
        refused: the input rows that could not be read, each with its ``reason``.
        page_data: the report's ``pairs.js`` (:mod:`mispair.audit.page_data`).
        thumbs: the folder of the report's thumbnails (copied beside the page when it is saved
            elsewhere), or None.
    """

    pairs: pd.DataFrame
    summary: dict[str, Any]
    report: str
    refused: pd.DataFrame | None = field(default=None)
    page_data: str = ""
    thumbs: Path | None = None

    def keep(self, max_mismatch: float | None = None) -> pd.DataFrame:
        """The rows to keep: mismatch probability below ``max_mismatch`` (default: the audit's
        threshold, the rows not suspected)."""
        limit = self.summary["threshold"] if max_mismatch is None else max_mismatch
        if not 0 <= limit <= 1:
            raise ConfigError(f"max_mismatch: a probability in [0, 1], got {limit}")
        return self.pairs[self.pairs["mismatch_probability"] < limit]

    def save(self, folder: str | Path) -> Path:
        """Write ``pairs.csv``, ``pairs.parquet``, ``refused.csv``, ``report.html``, ``pairs.js``
        (with ``thumbs/``) and ``summary.json`` into ``folder``: the old audit files go first and
        ``summary.json`` comes last, so the folder never holds a mix of two audits or a report
        without its summary."""
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"{folder}: exists and is not a folder; give a folder for the audit's files")
        folder.mkdir(parents=True, exist_ok=True)
        for name in OUTPUTS:
            (folder / name).unlink(missing_ok=True)
        atomic_text(folder / "pairs.csv", table_csv(self.pairs))
        atomic_write(folder / "pairs.parquet", lambda handle: self.pairs.to_parquet(handle, index=False))
        if self.refused is not None and len(self.refused):
            atomic_text(folder / "refused.csv", table_csv(self.refused))
        if self.thumbs is not None and self.thumbs.is_dir() and self.thumbs != folder / THUMBS:
            shutil.copytree(self.thumbs, folder / THUMBS, dirs_exist_ok=True)
        atomic_text(folder / "pairs.js", self.page_data)
        atomic_text(folder / "report.html", self.report)
        atomic_text(folder / "summary.json", json.dumps(self.summary, indent=2) + "\n")
        return folder


def table_csv(frame: pd.DataFrame) -> str:
    """``frame`` as CSV text, every text cell spreadsheet-safe (captions are untrusted text)."""
    safe = frame.copy()
    for column in safe.columns:
        if safe[column].dtype == object or str(safe[column].dtype).startswith(("string", "str")):
            safe[column] = safe[column].map(spreadsheet_safe)
    return safe.to_csv(index=False, lineterminator="\r\n")

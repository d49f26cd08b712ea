"""What an audit gives back: every pair ranked (a pandas DataFrame), the summary, the report."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from mispair.atomic import atomic_text, atomic_write
from mispair.audit.picture_digests import recorded
from mispair.audit.summary import AuditSummary
from mispair.audit.thumbs import THUMBS
from mispair.errors import ConfigError
from mispair.safe_io import CSV_ROWS
from mispair.safe_io import write_csv as _write_safe_csv

if TYPE_CHECKING:
    import pandas as pd
    from typing_extensions import Unpack

    from mispair.audit.apply import AppliedCollection, ApplyOptions
    from mispair.audit.join_findings import JoinFindings
    from mispair.estimate.audit_estimate import AuditEstimate
    from mispair.timings import Timings

OUTPUTS = (
    "summary.json",
    "report.html",
    "pairs.js",
    "pairs.csv",
    "pairs.parquet",
    "refused.csv",
    "sample.csv",
    "structure.json",
    "repair.csv",
)
"""What the audit writes into its folder (``summary.json`` last: its presence means complete)."""
LATER_OUTPUTS = ("estimate.json", "estimate_pairs.csv")
"""What ``mispair estimate`` adds to an audit's folder: removed when the audit is written anew
(answers on an earlier audit's sample do not describe this one)."""


@dataclass
class AuditResult:
    """An audit of a collection.

    Attributes:
        pairs: one row per input pair, from the most suspect to the least: ``pair_id`` (stable:
            the input row or the id column), ``rank``, ``split``, ``image_id``, ``caption``,
            ``mismatch_probability``, ``suspected``, ``held_out_score`` (the score of the models
            that never trained on the pair; lower = more suspect), ``pair_similarity``, the 3
            suggested other captions for its image and other images for its caption
            (``suggested_caption_1..3``, ``suggested_image_id_1..3`` with their scores),
            ``duplicate_image_of``, ``same_caption_images``, ``leak``, ``why`` (in words), and the
            truth when the audit planted swaps.
        summary: what ``summary.json`` holds, typed (:class:`~mispair.audit.summary.AuditSummary`:
            counts, the estimated mismatched share with its interval, the self-check, retrieval
            figures, ``duplicates``, ``audit_id``, the ``image_root`` where its image files lie).
        report: the ``report.html`` page.
        refused: the input rows that could not be read, each with its ``reason``.
        page_data: the report's ``pairs.js`` (:mod:`mispair.audit.page_data`).
        thumbs: the folder of the report's thumbnails (copied beside the page when it is saved
            elsewhere), or None.
        sample: every pair in the audit's random order (``sample.csv``: ``pair_id``, ``order``
            from 1): the first ``n`` are a uniform sample for a person to judge
            (:mod:`mispair.estimate`), or None for an audit written before it existed.
        dataset: the Hugging Face ``Dataset`` given to ``mispair.audit`` (for
            :meth:`to_dataset`), or None.
        structure: the join errors found (``structure.json``,
            :class:`~mispair.audit.join_findings.JoinFindings`: shift runs and repeated
            captions), or None for an audit written before they were searched.
    """

    pairs: pd.DataFrame
    summary: AuditSummary
    report: str
    refused: pd.DataFrame | None = field(default=None)
    page_data: str = ""
    thumbs: Path | None = None
    sample: pd.DataFrame | None = None
    dataset: Any = field(default=None, repr=False)
    structure: JoinFindings | None = None

    def to_dataset(self) -> Any:
        """The audited Hugging Face ``Dataset`` (or ``DatasetDict``) with the audit's columns
        added, aligned with its rows (:mod:`mispair.audit.hf_dataset`): the one given to
        ``mispair.audit`` (``dataset``), else the ``save_to_disk`` folder audited."""
        from mispair.audit.hf_dataset import audited_dataset

        return audited_dataset(self.pairs, self.summary, self.dataset)

    def keep(self, max_mismatch: float | None = None) -> pd.DataFrame:
        """The rows to keep: mismatch probability below ``max_mismatch`` (default: the rows the
        audit did not suspect)."""
        if max_mismatch is None and "suspected" in self.pairs:
            return self.pairs[~self.pairs["suspected"].astype(bool)]
        limit = self.summary.threshold if max_mismatch is None else max_mismatch
        if not 0 <= limit <= 1:
            raise ConfigError(f"max_mismatch: a probability in [0, 1], got {limit}")
        return self.pairs[self.pairs["mismatch_probability"] < limit]

    def save(self, folder: str | Path, *, timings: Timings | None = None) -> Path:
        """Write ``pairs.csv``, ``pairs.parquet``, ``refused.csv``, ``report.html``, ``pairs.js``
        (with ``thumbs/``) and ``summary.json`` into ``folder``: the old audit files go first and
        ``summary.json`` comes last, so the folder never holds a mix of two audits or a report
        without its summary. With ``timings``, the time since its last lap goes to ``report`` and
        the summary's ``timings`` are taken just before ``summary.json`` is written."""
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"{folder}: exists and is not a folder; give a folder for the audit's files")
        folder.mkdir(parents=True, exist_ok=True)
        for name in (*OUTPUTS, *LATER_OUTPUTS):
            (folder / name).unlink(missing_ok=True)
        planted = self.summary.planted is not None  # each picture by its content, for apply
        self.pairs = recorded(self.pairs, self.summary.image_root, planted)
        atomic_write(folder / "pairs.csv", lambda handle: write_csv(self.pairs, handle))
        atomic_write(folder / "pairs.parquet", lambda handle: write_parquet(self.pairs, handle))
        wrote_refused = self.refused is not None and len(self.refused) > 0
        if wrote_refused:
            atomic_write(folder / "refused.csv", lambda handle: write_csv(self.refused, handle))
        if self.sample is not None:
            sample = self.sample
            atomic_write(folder / "sample.csv", lambda handle: write_csv(sample, handle))
        if self.structure is not None:
            _save_structure(folder, self.structure, self.pairs, self.summary.audit_id or "")
        written = {
            "refused.csv": wrote_refused,
            "sample.csv": self.sample is not None,
            "structure.json": self.structure is not None,
            "repair.csv": self.structure is not None,
        }
        self.summary.files = [name for name in self.summary.files if written.get(name, True)]
        if self.thumbs is not None and self.thumbs.is_dir() and self.thumbs != folder / THUMBS:
            shutil.copytree(self.thumbs, folder / THUMBS, dirs_exist_ok=True)
        atomic_text(folder / "pairs.js", self.page_data)
        atomic_text(folder / "report.html", self.report)
        if timings is not None:
            timings.lap("report")
            self.summary.timings = timings.to_dict()
        atomic_text(folder / "summary.json", json.dumps(self.summary.to_dict(), indent=2) + "\n")
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> AuditResult:
        """The audit saved in ``folder`` (its ``summary.json`` and ``pairs.parquet``; the CSV
        is spreadsheet-safe, not the exact text), every file checked as untrusted input
        (:func:`mispair.audit.audit_folder.read_audit_folder`)."""
        from mispair.audit.audit_folder import read_audit_folder
        from mispair.audit.join_findings import read_structure
        from mispair.estimate.sample import SAMPLE, read_sample

        read = read_audit_folder(folder)
        pairs, summary, page, rejected = read.pairs, read.summary, read.report, read.refused
        sample = read_sample(folder) if (Path(folder) / SAMPLE).exists() else None
        structure = read_structure(Path(folder))
        return cls(pairs, AuditSummary.from_dict(summary), page, rejected, sample=sample, structure=structure)

    def estimate(
        self,
        labels: str | Path | pd.DataFrame | Sequence[str | Path | pd.DataFrame],
        *,
        fdr: float | None = None,
    ) -> AuditEstimate:
        """What a person's answers on the audit's random sample prove (:mod:`mispair.estimate`):
        ``labels`` a labels file (``pair_id,label``: correct / mismatched / unsure; the review
        page's decisions file too) or a DataFrame, or several reviewers' (merged); the answers
        must be the first ``n`` pairs of :attr:`sample`. ``fdr``: also choose the pairs to drop
        with that false-discovery rate against the answers. The same numbers as
        ``mispair estimate`` and the review page's "check a sample"."""
        from mispair.estimate.audit_estimate import estimate_pairs
        from mispair.estimate.sample import verify_sample

        if self.sample is None:
            raise ConfigError("this audit has no random sample (audited before it existed); audit it again")
        verify_sample(
            self.sample, self.pairs, self.summary.sample_seed, self.summary.audit_id or "", "this audit"
        )
        sources = list(labels) if isinstance(labels, (list, tuple)) else [labels]
        return estimate_pairs(
            self.pairs,
            self.sample,
            sources,
            audit=self.summary.audit_id or "",
            fdr=fdr,
            audit_share=self.summary.estimated_mismatched_share,
            audit_share_interval=_interval(self.summary.estimated_mismatched_share_interval),
        )

    def apply(
        self,
        decisions: str | Path | pd.DataFrame | None,
        out: str | Path,
        *,
        repair: bool = False,
        **options: Unpack[ApplyOptions],
    ) -> AppliedCollection:
        """Write the cleaned collection into the new folder ``out`` (see
        :func:`mispair.audit.apply.apply_decisions`): ``decisions`` (a ``decisions.csv`` path or
        a DataFrame with ``pair_id``, ``decision``, ``caption``; None with a ``threshold`` or an
        ``fdr``) applied, undecided pairs kept, or
        dropped when their mismatch probability is at least ``threshold`` or their q-value at most
        ``fdr`` (an estimated ``fdr`` of the dropped pairs are matched ones). An existing non-empty
        ``out`` is refused unless ``overwrite``. ``format``: ``"same"`` writes the collection's
        own form (a table, shards of at most ``shard_bytes``, an imagefolder, COCO JSON),
        ``"folder"`` a folder of pictures with ``captions.csv``. ``repair``: each caption of
        the audit's shift runs moved back to its own picture and the rows whose own caption is
        lost dropped (:mod:`mispair.audit.repair`), under the ``decisions`` given."""
        from mispair.audit.apply import apply_decisions

        if repair:
            from mispair.audit.repair import with_repair

            decisions = with_repair(
                self.structure, self.pairs, decisions, self.summary.audit_id, self.summary.to_dict()
            )

        return apply_decisions(self.pairs, self.summary.to_dict(), decisions, out, **options)

    def to_fiftyone(self, name: str, *, overwrite: bool = False) -> Any:
        """The audit as the persistent FiftyOne dataset ``name``: a sample per picture, its
        captions as labels with the audit's fields, the map as the brain run ``map``
        (:mod:`mispair.audit.fiftyone_dataset`; pip install 'mispair[fiftyone]')."""
        from mispair.audit.fiftyone_dataset import to_fiftyone

        return to_fiftyone(self.pairs, self.summary.to_dict(), name, overwrite=overwrite)


def _save_structure(folder: Path, structure: JoinFindings, pairs: pd.DataFrame, audit: str) -> None:
    """``structure.json`` and the repair's decisions (``repair.csv``) beside it."""
    from mispair.audit.repair import REPAIR, repair_frame

    structure.save(folder)
    repair = repair_frame(structure, pairs, audit)
    atomic_write(folder / REPAIR, lambda handle: write_csv(repair, handle))


def _interval(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else [float(interval[0]), float(interval[1])]


def audit_id(pairs: pd.DataFrame) -> str:
    """The audit's id: :func:`mispair.estimate.labels.pairs_audit_id` of its pairs (``pair_id``,
    ``image_id``, ``caption`` of every row). Scores and ranks do not enter, so an audit of the
    same collection again has the same id and its decisions still apply."""
    from mispair.estimate.labels import pairs_audit_id

    return pairs_audit_id(pairs["pair_id"].tolist(), pairs["image_id"].tolist(), pairs["caption"].tolist())


TABLE_ROWS = CSV_ROWS
"""The rows :func:`write_csv` and :func:`write_parquet` convert at a time: a million pairs' table
is 400 MB of CSV text, which whole, with its bytes and the copy made safe, took 1 GB more."""


def table_csv(frame: pd.DataFrame) -> str:
    """``frame`` as CSV text, every text cell spreadsheet-safe (captions are untrusted text)."""
    buffer = io.BytesIO()
    write_csv(frame, buffer)
    return buffer.getvalue().decode("utf-8")


def write_csv(frame: pd.DataFrame, handle: BinaryIO) -> None:
    """Write :func:`table_csv` of ``frame`` to the binary ``handle`` (UTF-8), :data:`TABLE_ROWS`
    rows at a time (:func:`mispair.safe_io.write_csv`, the one writer of user-facing CSV)."""
    _write_safe_csv(frame, handle)


def write_parquet(frame: pd.DataFrame, handle: BinaryIO) -> None:
    """Write ``frame`` (no index) as Parquet to ``handle``, one row group of :data:`TABLE_ROWS`
    rows at a time, each in the schema of the whole frame (``pd.read_parquet`` reads the same
    frame back)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.Schema.from_pandas(frame, preserve_index=False)
    with pq.ParquetWriter(handle, schema) as writer:
        for start in range(0, max(len(frame), 1), TABLE_ROWS):
            part = frame.iloc[start : start + TABLE_ROWS]
            writer.write_table(pa.Table.from_pandas(part, schema=schema, preserve_index=False))

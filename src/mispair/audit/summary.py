"""What an audit found, typed: :class:`AuditSummary` and its parts (detection against a known
truth, duplicates, the self-check, the calibration, retrieval), written as ``summary.json`` with a
format version and read back from any version (:meth:`AuditSummary.from_dict`), and said in a
few lines for the command line (:meth:`AuditSummary.lines`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from mispair.audit.selfcheck import SelfCheck
from mispair.engine.metrics import format_metrics

SUMMARY_FORMAT = 2
"""``summary.json``'s format: 2 adds ``format``; 1 (no ``format`` key) is every audit written
before, with a ``calibration`` part or, older still, without one: both still load."""

Json = dict[str, Any]


def _known(cls: type, data: Mapping[str, object]) -> Json:
    """The entries of ``data`` that are fields of the dataclass ``cls`` (an older or newer
    file's extra keys are left out)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True)
class Detection:
    """The ranking and the suspected set against a known truth (planted swaps or a noise
    record): ``auc``, ``average_precision``, the suspected set's ``precision`` and ``recall``,
    and of the pairs left unsuspected the share truly matched (``kept_precision``) and of the
    matched pairs the share kept (``kept_recall``; None in audits written before it was
    measured)."""

    auc: float
    average_precision: float
    precision: float
    recall: float
    kept_precision: float | None = None
    kept_recall: float | None = None
    suspected: int | None = None
    mismatched: int | None = None
    pairs: int | None = None

    def to_dict(self) -> Json:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class RawScore:
    """The raw cosine of the given vectors (the usual CLIP-score filter): its ``column`` in the
    pairs and its ``auc`` and ``average_precision`` against the truth, when known."""

    column: str
    auc: float | None = None
    average_precision: float | None = None

    def to_dict(self) -> Json:
        known = self.auc is not None
        detection = {"auc": self.auc, "average_precision": self.average_precision} if known else None
        return {"column": self.column, "detection": detection}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> RawScore:
        detection = data.get("detection")
        found = detection if isinstance(detection, Mapping) else {}
        column = str(data.get("column", "raw_similarity"))
        return cls(column, found.get("auc"), found.get("average_precision"))


@dataclass(frozen=True)
class DuplicateCounts:
    """Near-duplicate images (cosine of the mean-pooled features at least ``threshold``), pairs
    whose caption other images carry, and dev/test pairs repeating a training pair (``leaks``)."""

    method: str = ""
    threshold: float = 0.0
    images_with_near_duplicate: int = 0
    pairs_with_near_duplicate_image: int = 0
    pairs_with_caption_on_other_images: int = 0
    leaks: int = 0


@dataclass(frozen=True)
class CalibrationPart:
    """How the share and the probabilities were made: ``method`` ``decoys`` (calibrated by decoy
    pairs: the interval ``level``, the decoys' count and mixing ``lam``bda, the estimated AUC
    between pairs and decoys, the ``fdr`` asked for and the estimated error rates of the drop) or
    ``mixture`` (a two-component mixture, not calibrated); ``share_upper_bound``: the best-bin
    upper confidence bound on the share (:func:`~mispair.division.calibration.share_bound`);
    ``note``: what to trust, in words."""

    method: str
    note: str
    decoys: int | None = None
    level: float | None = None
    lam: float | None = None
    separation_auc: float | None = None
    fdr: float | None = None
    estimated_false_drop_share: float | None = None
    estimated_kept_mismatched_share: float | None = None
    share_upper_bound: float | None = None

    @property
    def calibrated(self) -> bool:
        return self.method == "decoys"

    def to_dict(self) -> Json:
        if not self.calibrated:
            return {"method": self.method, "note": self.note}
        named = asdict(self)
        named["lambda"] = named.pop("lam")
        order = ("method", "decoys", "level", "lambda", "separation_auc", "share_upper_bound", "fdr")
        rest = ("estimated_false_drop_share", "estimated_kept_mismatched_share", "note")
        written = (*order, *rest)  # the bound only where the audit computed one (not before it existed)
        return {k: named[k] for k in written if k != "share_upper_bound" or named[k] is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> CalibrationPart:
        named = dict(data)
        if "lambda" in named:
            named["lam"] = named.pop("lambda")
        named.setdefault("note", "")
        named.setdefault("method", "mixture")
        return cls(**_known(cls, named))  # type: ignore[arg-type]


@dataclass(frozen=True)
class AnswersUsed:
    """A person's answers fed back to the audit (``mispair audit --labels``), fixed into its
    verdicts: the pairs judged ``correct`` are kept (never suspected: mismatch probability 0,
    q-value 1), ``correct_suspected_by_scores`` of them were suspected by the scores alone; those
    judged ``mismatched`` are suspected (probability 1, q-value 0), ``mismatched_kept_by_scores``
    of them were not by the scores alone; ``unsure`` answers (a pair the reviewers judged
    differently too) are left to the scores; ``files``: the labels files."""

    correct: int
    mismatched: int
    unsure: int = 0
    correct_suspected_by_scores: int = 0
    mismatched_kept_by_scores: int = 0
    files: list[str] = field(default_factory=list)

    def line(self) -> str:
        """The answers' part of the headline, in words."""
        fixed, given = self.correct + self.mismatched, self.correct + self.mismatched + self.unsure
        line = (
            f"your answers: {fixed} of {given} fixed their pairs' verdicts (--labels): "
            f"{self.correct} judged correct kept ({self.correct_suspected_by_scores} of them suspected "
            f"by the scores alone), {self.mismatched} judged mismatched suspected "
            f"({self.mismatched_kept_by_scores} of them kept by the scores alone)"
        )
        return line + (f"; {self.unsure} unsure left to the scores" if self.unsure else "")


@dataclass(frozen=True)
class JoinErrors:
    """The join errors found (``structure.json``, :mod:`mispair.audit.join_findings`): the
    ``shifts`` and the pairs in them, the ``repeated_captions`` and their pairs, the suspects
    they hold (``suspected_in_findings``: counted once, not as independent errors), the
    estimated mismatched share once the shifts are repaired, and the ``findings`` in words."""

    shifts: int = 0
    shifted_pairs: int = 0
    repeated_captions: int = 0
    repeated_caption_pairs: int = 0
    suspected_in_findings: int = 0
    share_after_repair: float | None = None
    share_after_repair_interval: list[float] | None = None
    findings: list[str] = field(default_factory=list)

    def lines(self, suspected: int) -> list[str]:
        """The headline's first lines: each finding, then what the suspects are made of."""
        if not self.findings:
            return []
        lines = [f"join error: {finding}" for finding in self.findings]
        parts = [
            f"{suspected - self.suspected_in_findings} of the {suspected} suspected pairs are outside "
            "these findings"
        ]
        if self.share_after_repair is not None and self.shifts:
            interval = self.share_after_repair_interval
            within = ""
            if interval is not None:
                within = f" (95% interval {100 * interval[0]:.0f}–{100 * interval[1]:.0f}%)"
            parts.append(
                f"after `mispair apply --repair` about {100 * self.share_after_repair:.0f}%{within} of the "
                "pairs would remain mismatched"
            )
        checked = "the scores' word, not checked by any answer, so review it before applying"
        return [*lines, "; ".join(parts) + f" (structure.json; repair.csv lists the repair: {checked})"]


@dataclass(frozen=True)
class ReseedSpread:
    """How the audit's verdicts moved when its runs were trained again with other seeds
    (``--reseeds``): ``audits`` in all (this one and ``audits − 1`` reseeded), each one's
    ``shares`` and ``suspects``; this audit's suspects ``suspected_in_all`` of them and in
    ``suspected_in_most`` (more than half); the suspects' mean Jaccard overlap over every two
    audits (``jaccard_mean``, ``jaccard_min``). Each pair's count is ``pairs.csv``'s
    ``suspected_in_reseeds``."""

    audits: int
    shares: list[float | None]
    suspects: list[int]
    suspected_in_all: int
    suspected_in_most: int
    jaccard_mean: float
    jaccard_min: float

    def line(self) -> str:
        """The headline's line on the spread."""
        known = [s for s in self.shares if s is not None]
        shares = f"the share read {100 * min(known):.1f}%–{100 * max(known):.1f}%; " if known else ""
        return (
            f"reseeds: {self.audits} audits with other seeds ({self.audits}× the training): {shares}"
            f"{min(self.suspects)}–{max(self.suspects)} suspects, {self.suspected_in_all} of this audit's "
            f"{self.suspects[0]} suspected in all {self.audits} and {self.suspected_in_most} in most; two "
            f"audits' suspects overlap {self.jaccard_mean:.2f} on average (Jaccard, lowest "
            f"{self.jaccard_min:.2f}; pairs.csv: suspected_in_reseeds); the error of a cut your answers "
            "prove holds whatever the seed"
        )


@dataclass(frozen=True)
class Retrieval:
    """The test-split retrieval metrics of the audit's run and of its clean twin (or None)."""

    test: dict[str, float]
    clean_run_test: dict[str, float] | None = None


@dataclass
class AuditSummary(Mapping[str, object]):
    """Everything ``summary.json`` holds: the collection and run, the counts, the estimated
    mismatched share with its interval, the suspects' ``threshold``, and the typed parts. The
    typed attributes are the API; read as a mapping, it is ``summary.json``'s JSON (read-only),
    as audits before the typed summary gave it."""

    collection: str
    threshold: float
    collection_name: str = ""
    created: str = ""
    recipe: str = ""
    run: str | None = None
    pairs: int | None = None
    pairs_scored: int = 0
    pairs_by_split: dict[str, int] = field(default_factory=dict)
    images: int = 0
    estimated_mismatched_share: float | None = None
    estimated_mismatched_share_interval: tuple[float, float] | None = None
    suspected: int = 0
    scored_by: str = ""
    retrieval: Retrieval | None = None
    truth: str | None = None
    planted: float | None = None
    self_check: SelfCheck | None = None
    detection: Detection | None = None
    files: list[str] = field(default_factory=list)
    calibration: CalibrationPart | None = None
    pairs_read: int | None = None
    pairs_refused: int = 0
    split_note: str | None = None
    audit_id: str | None = None
    image_root: str | None = None
    pictures: str | None = None
    duplicates: DuplicateCounts | None = None
    map: str | None = None
    raw_score: RawScore | None = None
    seconds: float | None = None
    timings: dict[str, float] | None = None
    warnings: list[str] | None = None
    sample_seed: int | None = None
    answers: AnswersUsed | None = None
    join_errors: JoinErrors | None = None
    reseeds: ReseedSpread | None = None

    def to_dict(self) -> Json:
        """``summary.json``'s content (format :data:`SUMMARY_FORMAT`)."""
        share = self.estimated_mismatched_share_interval
        out: Json = {
            "collection": self.collection,
            "collection_name": self.collection_name,
            "created": self.created,
            "recipe": self.recipe,
            "run": self.run,
            "pairs": self.pairs,  # left out below when an older summary had none
            "pairs_scored": self.pairs_scored,
            "pairs_by_split": dict(self.pairs_by_split),
            "images": self.images,
            "estimated_mismatched_share": self.estimated_mismatched_share,
            "estimated_mismatched_share_interval": None if share is None else list(share),
            "suspected": self.suspected,
            "threshold": self.threshold,
            "division": {"scores": self.scored_by},
            "retrieval": None if self.retrieval is None else asdict(self.retrieval),
            "truth": self.truth,
            "planted": self.planted,
            "self_check": None if self.self_check is None else self.self_check.to_dict(),
            "detection": None if self.detection is None else self.detection.to_dict(),
            "files": list(self.files),
            "calibration": None if self.calibration is None else self.calibration.to_dict(),
            "pairs_read": self.pairs_read,
            "pairs_refused": self.pairs_refused,
            "split_note": self.split_note,
            "audit_id": self.audit_id,
            "image_root": self.image_root,
            "pictures": self.pictures,
            "duplicates": None if self.duplicates is None else asdict(self.duplicates),
            "map": self.map,
        }
        if self.pairs is None:
            del out["pairs"]
        optional = {"raw_score": self.raw_score, "seconds": self.seconds, "timings": self.timings}
        for key, value in optional.items():
            if value is not None:
                out[key] = value.to_dict() if isinstance(value, RawScore) else value
        if self.warnings is not None:
            out["warnings"] = list(self.warnings)
        if self.sample_seed is not None:
            out["sample"] = {
                "seed": self.sample_seed,
                "file": "sample.csv",
                "order": "stratified random (mispair.estimate.design)",
            }
        if self.answers is not None:
            out["answers"] = asdict(self.answers)
        if self.join_errors is not None:
            out["join_errors"] = asdict(self.join_errors)
        if self.reseeds is not None:
            out["reseeds"] = asdict(self.reseeds)
        out["format"] = SUMMARY_FORMAT
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> AuditSummary:
        """The summary of ``summary.json``'s content, of this format or an earlier one (format
        1, with or without ``calibration``); keys it does not know are left out."""
        named = _known(cls, data)
        division = data.get("division")
        if isinstance(division, Mapping):
            named["scored_by"] = str(division.get("scores", ""))
        sample = data.get("sample")
        if isinstance(sample, Mapping) and isinstance(sample.get("seed"), int):
            named["sample_seed"] = sample["seed"]
        interval = data.get("estimated_mismatched_share_interval")
        if isinstance(interval, (list, tuple)) and len(interval) == 2:
            named["estimated_mismatched_share_interval"] = (interval[0], interval[1])
        parts = {
            "retrieval": lambda d: Retrieval(**_known(Retrieval, d)),
            "self_check": lambda d: SelfCheck(**_known(SelfCheck, d)),
            "detection": lambda d: Detection(**_known(Detection, d)),
            "calibration": CalibrationPart.from_dict,
            "duplicates": lambda d: DuplicateCounts(**_known(DuplicateCounts, d)),
            "raw_score": RawScore.from_dict,
            "answers": lambda d: AnswersUsed(**_known(AnswersUsed, d)),
            "join_errors": lambda d: JoinErrors(**_known(JoinErrors, d)),
            "reseeds": lambda d: ReseedSpread(**_known(ReseedSpread, d)),
        }
        for key, build in parts.items():
            value = data.get(key)
            named[key] = build(value) if isinstance(value, Mapping) and value else None
        named.setdefault("collection", "")
        named.setdefault("threshold", 0.5)
        return cls(**named)  # type: ignore[arg-type]

    def __getitem__(self, key: str) -> object:
        """``summary.json``'s field ``key``."""
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    def lines(self, out: Path) -> list[str]:
        """The audit's result in a few lines: what was found, how well (when it can tell), where
        (``out``: the audit's folder)."""
        lines = [] if self.join_errors is None else self.join_errors.lines(self.suspected)
        lines.append(self._found())
        if self.answers is not None:
            lines.append(self.answers.line())
        if self.reseeds is not None:
            lines.append(self.reseeds.line())
        calibration = self.calibration
        if calibration is not None and calibration.calibrated:
            lines.append(f"trust: {calibration.note} ({calibration.decoys} decoy pairs)")
        if self.pairs_refused:
            lines.append(
                f"refused {self.pairs_refused} of {self.pairs_read} rows that could not be read (reasons "
                f"in {out / 'refused.csv'})"
            )
        if self.split_note:
            lines.append(f"note: {self.split_note}")
        lines += self._duplicates() + self._detection() + self._self_check()
        if self.retrieval is not None:
            lines.append(format_metrics(self.retrieval.test, "retrieval on the test split (this run)"))
            if self.retrieval.clean_run_test:
                lines.append(
                    format_metrics(self.retrieval.clean_run_test, "the same run without the planted noise")
                )
        lines.append(
            f"wrote {out / 'report.html'} (open it to review the pairs), {out / 'pairs.csv'}, "
            f"{out / 'summary.json'}"
        )
        return lines

    def _found(self) -> str:
        """The first line: the pairs audited, the suspects and the share."""
        splits = ", ".join(f"{n} {name}" for name, n in self.pairs_by_split.items())
        audited = f"audited {self.pairs_scored} of {self.pairs} pairs of {self.collection_name} ({splits})"
        if self.pairs_refused:  # the rows given, not only those read: none vanishes from the count
            audited = (
                f"audited {self.pairs_scored} of {self.pairs_read} rows of {self.collection_name} "
                f"({splits}; {self.pairs_refused} refused, refused.csv)"
            )
        share = 100 * (self.estimated_mismatched_share or 0.0)
        low, high = (100 * x for x in self.estimated_mismatched_share_interval or (0.0, 0.0))
        calibration = self.calibration
        if calibration is None or not calibration.calibrated:
            return (
                f"{audited}: {self.suspected} suspected, estimated mismatched share "
                f"{share:.1f}% ({low:.1f}–{high:.1f}%)"
            )
        headline = (
            f"{audited}: about {share:.0f}% of the pairs "
            f"({calibration.level:.0%} interval {low:.0f}–{high:.0f}%) are as unrelated as a "
            f"caption taken from another picture; "
        )
        if not self.suspected:  # no cut: its error rates would describe no drop (trust line says why)
            return f"{headline}none suspected (--fdr {calibration.fdr:g})"
        return (
            f"{headline}{self.suspected} suspected at an estimated "
            f"false-discovery rate of {calibration.estimated_false_drop_share:.0%} (--fdr "
            f"{calibration.fdr:g}), leaving an estimated "
            f"{calibration.estimated_kept_mismatched_share:.0%} mismatched among the rest"
        )

    def _duplicates(self) -> list[str]:
        counts = self.duplicates
        if counts is None or not (
            counts.images_with_near_duplicate or counts.pairs_with_caption_on_other_images or counts.leaks
        ):
            return []
        return [
            f"duplicates: {counts.images_with_near_duplicate} images with a near-duplicate, "
            f"{counts.pairs_with_caption_on_other_images} pairs whose caption is on other "
            f"images, {counts.leaks} dev/test pairs repeating a training pair "
            "(columns duplicate_image_of, same_caption_images, leak)"
        ]

    def _detection(self) -> list[str]:
        detection, raw = self.detection, self.raw_score
        if detection is None:
            return []
        line = (
            f"against {self.truth}: detection AUC {detection.auc:.3f}, average "
            f"precision {detection.average_precision:.3f}, suspected set precision "
            f"{detection.precision:.2f} recall {detection.recall:.2f}"
        )
        if detection.kept_precision is not None:  # an audit written before it was measured has none
            line += (
                f"; the pairs left unsuspected are {detection.kept_precision:.0%} truly matched "
                f"(keeping {detection.kept_recall:.0%} of the matched pairs)"
            )
        lines = [line]
        if raw is not None and raw.auc is not None:
            lines.append(
                f"the raw cosine of the given vectors (the usual CLIP-score filter) on the same "
                f"pairs: detection AUC {raw.auc:.3f}, average precision "
                f"{raw.average_precision:.3f} (the audit's: {detection.auc:.3f}, "
                f"{detection.average_precision:.3f})"
            )
        return lines

    @staticmethod
    def _self_check_auc(check: SelfCheck) -> str:
        if check.consistent:
            return (
                f"self-check: the ranking's AUC on this collection's mismatches is about "
                f"{check.estimated_auc:.3f} (measured {check.measured_auc:.3f} on the planted "
                f"swaps, corrected for the about {100 * check.originals_mismatched_share:.0f}% of "
                f"your own pairs that the planted swaps show to be mismatched)"
            )
        if check.planted_like_decoys is not None:  # the share read is the decoys'
            return (
                f"self-check: the ranking's AUC on this collection's mismatches is at least "
                f"{check.measured_auc:.3f} (measured on the planted swaps; they are too few, or "
                "score too much like your correct pairs, to correct it for your own mismatched pairs)"
            )
        return (
            f"self-check: the ranking's AUC on this collection's mismatches is at least "
            f"{check.measured_auc:.3f} (measured on the planted swaps); the mismatched share is "
            f"overstated here: the planted swaps allow at most {100 * check.share_upper_bound:.0f}% "
            f"of your own pairs to be mismatched, yet {100 * check.originals_mismatched_share:.0f}% "
            "score like them (correct pairs the model finds hard do too): read the mismatch "
            "probabilities as a ranking, not as odds"
        )

    def _planted_like_decoys(self) -> list[str]:
        check = self.self_check
        if check is None or check.planted_like_decoys is None or check.planted_like_decoys_p is None:
            return []
        ratio = check.planted_like_decoys
        if check.planted_like_decoys_p >= 0.05:
            reading = "within chance of a decoy's rate, as the calibration assumes"
        elif ratio < 1:
            reading = "less often than a decoy would: the share is likely understated"
        else:
            reading = "more often than a decoy would: the share is likely overstated"
        return [
            f"self-check of the decoys: the planted swaps score among the lowest decoys {ratio:.2f} "
            f"times as often as a decoy would, {reading} (binomial p {check.planted_like_decoys_p:.2f})"
        ]

    def _self_check(self) -> list[str]:
        check = self.self_check
        if check is not None:
            return [self._self_check_auc(check), *self._planted_like_decoys()]
        if self.detection is None and not (self.calibration is not None and self.calibration.calibrated):
            return [
                "note: the estimated share comes from a mixture fitted to the held-out scores and errs "
                "high where many correct pairs score low; `--plant 0.1` checks the ranking and the share "
                "on swaps the audit plants itself"
            ]
        return []

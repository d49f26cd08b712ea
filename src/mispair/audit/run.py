"""``mispair audit``: train a noise-robust model on a collection, rank every pair by how likely it
is mismatched (scores no model fitted), suggest a fix, and write ``pairs.csv``, ``report.html``
and ``summary.json``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mispair.audit.atlas import MapPoints, embedding_map, map_columns
from mispair.audit.collection import audit_config, picture_root
from mispair.audit.duplicates import Duplicates, find_duplicates
from mispair.audit.join_findings import JoinFindings, join_findings
from mispair.audit.pair_table import AuditedPairs, audited_pairs, pair_table
from mispair.audit.ranking import (
    BestMatches,
    best_matches,
    score_division,
    suspicion_order,
)
from mispair.audit.raw_score import aligned, check_aligned, raw_similarity
from mispair.audit.report import Plot, ReviewPage, curve_plots, review_page, score_plot
from mispair.audit.reseeds import MAX_RESEEDS, RESEEDS_FOLDER, ReseedVerdict, reseed_spread, reseeded_config
from mispair.audit.result import LATER_OUTPUTS, OUTPUTS, AuditResult, audit_id
from mispair.audit.selfcheck import self_check
from mispair.audit.summary import (
    AnswersUsed,
    AuditSummary,
    Detection,
    DuplicateCounts,
    JoinErrors,
    RawScore,
    Retrieval,
)
from mispair.audit.thumbs import THUMBS
from mispair.audit.words import calibration_summary
from mispair.config import DataConfig, RunConfig, from_dict
from mispair.data.loading import load_split
from mispair.data.readers import reader_of
from mispair.distributed import DEFAULT_TIMEOUT, is_main_process
from mispair.division import Division, min_max_normalize
from mispair.division.calibration import Calibration
from mispair.division.detection import detection_curves, ranking_detection
from mispair.engine.assembly import run_data
from mispair.engine.checks import check_run_config
from mispair.engine.held_out.answers import answers_overrides, judged_on, read_answers
from mispair.engine.run import RunOutcome, TrainSummary, train_outcome, train_run
from mispair.engine.trained import TrainedRun
from mispair.errors import ConfigError, DataError
from mispair.estimate.sample import audit_sample
from mispair.output_folder import check_folder, claim_folder, holding
from mispair.progress import ProgressLine
from mispair.sanity import check_finite
from mispair.timings import Timings

if TYPE_CHECKING:
    import pandas as pd

    from mispair.data.readers import Reader

AUDIT_PARTS = ("reading", "division", "training", "ranking", "join_errors", "map", "report")
"""The parts of an audit timed in ``summary.json``'s ``timings`` (seconds, with their ``total``):
reading the collection and the text encoder's features, the held-out scorers, the final run and
its test evaluation, ranking with the best matches, duplicates and detection scores, the search
for join errors (``structure.json``), the map's embedding and projection, and writing the report
and tables."""

AUDIT_OUTPUTS = (
    *OUTPUTS,
    *LATER_OUTPUTS,
    THUMBS,
    "run",
    "clean-run",
    RESEEDS_FOLDER,
    "input.parquet",
    "input_dataset",
)
"""What an audit writes into its folder (and nothing else there is touched)."""

DEFAULT_FDR = 0.1
"""The estimated false-discovery rate of the suspected set (``--fdr``): about this share of the
pairs suspected are matched pairs dropped by mistake."""

REPORT_PAIRS = 100_000
"""The pairs the report shows by default, the most suspect first (its ``pairs.js`` takes about 400
bytes a pair: 40 MB here, 400 MB for a million, more than a browser page should load)."""


def audit_collection(
    data: str | Path,
    out: str | Path,
    *,
    config_path: str | None = None,
    overrides: Sequence[str] = (),
    plant: float | None = None,
    seed: int = 0,
    clean_run: bool = False,
    images: str | Path | None = None,
    top: int | None = None,
    resume: bool = True,
    progress: bool = True,
    log: Callable[[str], None] = print,
    overwrite: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    fdr: float = DEFAULT_FDR,
    labels: Sequence[str | Path] = (),
    reseeds: int = 1,
) -> AuditResult | None:
    """Audit every pair of the collection at ``data`` into the folder ``out``.

    Trains the audit's run (:data:`~mispair.audit.collection.AUDIT_RUN`, or ``config_path``, with
    ``overrides``) in ``out/run`` — resumable: an interrupted audit continues, a finished one is
    reused (``resume`` False: trained again) — and, with ``clean_run``, the same run without the
    planted noise in ``out/clean-run``.
    Every pair of every split gets a held-out score: the training pairs from the scorers that held
    their fold out, the dev and test pairs from every scorer (none trained on them). ``plant``
    swaps that share of the training pairs first and scores the audit against them. ``images``
    is where the pictures of a precomputed collection lie (default: its folder, then the Tux
    Paint and OpenClipart package folders); the report shows the ``top`` most suspect pairs
    (default: every pair up to :data:`REPORT_PAIRS`, else that many), with a thumbnail of each
    picture in ``out/thumbs``. ``out`` must be
    new, empty or an audit's; with ``overwrite`` another folder is used, and only the audit's own
    files in it are touched. The suspected pairs are those an estimated false-discovery rate of
    ``fdr`` drops (:mod:`mispair.division.calibration`: the probabilities and the share are
    calibrated by decoy pairs). ``labels``: a person's answers (labels files, several reviewers'
    merged; another audit's refused before any scorer trains) fixed for the held-out scorers
    (``division.answers``: pairs judged correct trusted, mismatched ones never trained on) and in
    the verdicts (:meth:`Verdicts.answered`: judged correct never suspected, judged mismatched
    always), and, when they are the first pairs of this audit's random sample, estimated from
    (:meth:`AuditResult.estimate`, ``estimate.json``). ``reseeds`` > 1: the run trained that many
    times in all, with the seeds after ``train.seed`` (:mod:`mispair.audit.reseeds`), and each
    pair's count of suspicions added (``suspected_in_reseeds``). Returns the
    :class:`AuditResult` it saved in ``out``.

    In processes started by torchrun (``mispair audit --nproc N``) every process calls it: the
    held-out scorers' folds are dealt over the processes and the final run trains a share of each
    batch (:func:`~mispair.engine.run.train_run`; collectives fail after ``timeout`` seconds);
    rank 0 alone then ranks the pairs and writes the report, and returns the result; the other
    processes return None.
    """
    started, timings = time.time(), Timings()
    options = AuditOptions(plant, seed, clean_run, images, top, resume, progress, log, overwrite, timeout)
    options = replace(options, fdr=fdr, labels=tuple(labels), reseeds=reseeds)
    overrides = [*overrides, *answers_overrides(options.labels)]
    request = AuditRequest.checked(Path(data), Path(out), options, config_path, overrides, started)
    main, out = is_main_process(), request.out
    if main:
        check_folder(out, AUDIT_OUTPUTS, overwrite=overwrite)  # nothing written until the input is read
    with holding(out) if main else contextlib.nullcontext():  # a second audit into the folder refuses
        _check_vectors(request.config.data)
        outcome, clean = _train(request, timings)
        others = _reseeded(request, timings)
        if not main:
            return None
        audit = _audit(request, outcome, clean, timings, others)
    if options.labels:
        _estimate_answers(audit, options, request.out)
    return audit


def _estimate_answers(audit: AuditResult, options: AuditOptions, out: Path) -> None:
    """The answers' estimate on this audit, written beside it, when they are a prefix of its
    sample; else one line saying why not. (Answers given on an earlier audit's sample seldom are:
    the sample's order follows the audit's probabilities, which the answers move.)"""
    try:
        found = audit.estimate(list(options.labels))
    except DataError as exc:
        options.log(
            f"audit: no estimate of this audit from the answers ({exc}); answers given on an earlier "
            "audit's sample are estimated by `mispair estimate` on that audit's folder"
        )
        return
    found.save(out)
    for line in found.lines():
        options.log(line.strip() if line.startswith("  ") else line)


@dataclass(frozen=True)
class AuditOptions:
    """How an audit runs: :func:`audit_collection`'s keyword arguments but the run's config."""

    plant: float | None = None
    seed: int = 0
    clean_run: bool = False
    images: str | Path | None = None
    top: int | None = None
    resume: bool = True
    progress: bool = True
    log: Callable[[str], None] = print
    overwrite: bool = False
    timeout: float = DEFAULT_TIMEOUT
    fdr: float = DEFAULT_FDR
    labels: tuple[str | Path, ...] = ()
    reseeds: int = 1

    def check(self, out: Path) -> None:
        """A one-line :class:`ConfigError` for an option no audit into ``out`` can take."""
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {out}: exists and is not a folder; give a folder for the audit's files")
        if self.top is not None and self.top < 0:
            raise ConfigError(f"--top: at least 0, got {self.top}")
        if not 0 < self.fdr < 1:
            raise ConfigError(f"--fdr: a false-discovery rate in (0, 1), got {self.fdr}")
        if not 1 <= self.reseeds <= MAX_RESEEDS:
            raise ConfigError(f"--reseeds: the audits in all, 1 to {MAX_RESEEDS}, got {self.reseeds}")


@dataclass(frozen=True)
class AuditRequest:
    """An audit, checked before anything is written: the collection at ``root``, the folder
    ``out``, the audit run's ``config``, the ``options`` and when it ``started``."""

    root: Path
    out: Path
    config: RunConfig
    options: AuditOptions
    started: float

    @classmethod
    def checked(
        cls,
        root: Path,
        out: Path,
        options: AuditOptions,
        config_path: str | None,
        overrides: Sequence[str],
        started: float,
    ) -> AuditRequest:
        """The request, its options and every config option checked before the folder is touched."""
        options.check(out)
        config = audit_config(
            root, out, config_path=config_path, overrides=overrides, plant=options.plant, seed=options.seed
        )
        check_run_config(config)
        return cls(root, out, config, options, started)


def _check_vectors(data: DataConfig) -> None:
    """Before training: aligned vectors that cannot be compared are a mistake."""
    if aligned(data):
        check_aligned(data, load_split(data, data.train_split))


@dataclass(frozen=True)
class Verdicts:
    """The numbers a pair is suspected by: the score plot's mixture (``division``, also the
    numbers without decoys), the ``calibration`` (None without decoys), each pair's
    ``mismatch`` probability and the ``threshold`` from which it is suspected."""

    division: Division
    calibration: Calibration | None
    mismatch: np.ndarray
    threshold: float
    suspected: np.ndarray
    """``[n]`` bool: the suspected pairs — those whose probability reaches ``threshold``, none
    where the calibration supports no cut (its share's interval reaches 0)."""
    judged: np.ndarray | None = None
    """``[n]`` a person's answers fixed into the numbers above (:meth:`answered`; 1 mismatched, 0
    correct, NaN none or unsure), or None without any."""
    scored: np.ndarray | None = None
    """``[n]`` the scores' own mismatch probability, where answers moved ``mismatch``."""
    answers: AnswersUsed | None = None
    """What the answers fixed, counted for the summary (None without any)."""

    @classmethod
    def of(cls, audited: AuditedPairs, p_threshold: float, fdr: float) -> Verdicts:
        """Calibrated by the decoys at a false-discovery rate ``fdr``, else the mixture's at the
        division's ``p_threshold``."""
        division = score_division(audited.score)
        calibration = audited.calibration()
        if calibration is None:
            mismatch = 1.0 - division.clean_prob
            return cls(division, None, mismatch, 1.0 - p_threshold, mismatch >= 1.0 - p_threshold)
        return cls(
            division,
            calibration,
            calibration.mismatch_probability,
            calibration.threshold(fdr),
            calibration.suspected(fdr),
        )

    @property
    def q_value(self) -> np.ndarray | None:
        """The calibration's q-values (None without one); a pair judged correct 1 (no cut below
        1 drops it, ``apply --fdr`` keeps it), one judged mismatched 0 (every cut drops it)."""
        if self.calibration is None:
            return None
        q = self.calibration.q_value
        if self.judged is None:
            return q
        return np.where(self.judged == 1, 0.0, np.where(self.judged == 0, 1.0, q))

    @property
    def fixed(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The answers fixed and the scores' own mismatch probabilities (:func:`pair_table`'s
        ``answers``), or None without answers."""
        return None if self.judged is None or self.scored is None else (self.judged, self.scored)

    def answered(self, judged: np.ndarray | None, unsure: int = 0, files: Sequence[str] = ()) -> Verdicts:
        """These verdicts with a person's answers ``judged`` (``[n]``: 1 mismatched, 0 correct,
        NaN none or unsure) fixed: a pair judged correct is never suspected (mismatch probability
        0), one judged mismatched always is (probability 1); the others as the scores say.
        ``unsure`` answers and the labels ``files`` are counted in :attr:`answers`."""
        if judged is None:
            return self
        correct, mismatched = judged == 0, judged == 1
        used = AnswersUsed(
            correct=int(correct.sum()),
            mismatched=int(mismatched.sum()),
            unsure=unsure,
            correct_suspected_by_scores=int((correct & self.suspected).sum()),
            mismatched_kept_by_scores=int((mismatched & ~self.suspected).sum()),
            files=[str(f) for f in files],
        )
        mismatch = np.where(mismatched, 1.0, np.where(correct, 0.0, self.mismatch))
        suspected = (self.suspected & ~correct) | mismatched
        return replace(
            self, mismatch=mismatch, suspected=suspected, judged=judged, scored=self.mismatch, answers=used
        )


def _answers(paths: Sequence[str], audited: AuditedPairs) -> tuple[np.ndarray, int] | None:
    """The answers the run's scorers took (``division.answers``, ``--labels``) on every audited
    pair (1 mismatched, 0 correct, NaN none or unsure; checked against the collection before the
    scorers trained) and the count of unsure ones; None without any."""
    if not paths:
        return None
    labels = read_answers(paths)
    judged = judged_on(labels, audited.pair_id, ", ".join(paths))
    return judged, int((labels["label"] == "unsure").sum())


@dataclass(frozen=True)
class Sources:
    """Where an audit's collection came from: its ``reader``, the folder of its ``pictures``
    (None: none found), the ``files`` its images are read from and the rows it ``refused``."""

    reader: Reader
    pictures: Path | None
    files: Path | None
    refused: pd.DataFrame | None

    @classmethod
    def of(cls, audited: AuditedPairs, data: DataConfig, images: str | Path | None) -> Sources:
        pictures = _pictures(audited.image_ids, data, images)
        reader = reader_of(data)
        files = pictures or picture_root(audited.image_ids, reader.picture_dirs(data), features=True)
        return cls(reader, pictures, files, reader.refused(data))


@dataclass(frozen=True)
class Ranked:
    """An audit's pairs ranked: the ``audited`` pairs, their ``verdicts``, each image's and
    caption's best ``matches``, the ``duplicates``, the map's ``points`` and the join errors
    (``structure``)."""

    audited: AuditedPairs
    verdicts: Verdicts
    matches: BestMatches
    duplicates: Duplicates
    points: MapPoints
    structure: JoinFindings


def _audit(
    request: AuditRequest,
    outcome: RunOutcome,
    clean: TrainSummary | None,
    timings: Timings,
    others: list[ReseedVerdict],
) -> AuditResult:
    """Rank 0's audit of the trained run's ``outcome``: rank, summarize, write, each part lapped."""
    options, run = request.options, outcome.best
    audited = audited_pairs(run, progress=options.progress, outcome=outcome)
    check_finite(audited.score, "held-out pair scores", request.out / "run")  # before any result is written
    data = run_data(request.config)  # the form the run read: the reader's prepared collection, not again
    sources = Sources.of(audited, data, options.images)
    timings.lap("reading")
    options.log(
        ProgressLine(
            f"audit: ranking {len(audited.pairs)} pairs and finding the best match of each image and caption"
        )
    )
    ranked = _ranked(request, run, audited, timings)
    table = _table(ranked)  # not beside MiniLM
    timings.lap("ranking")
    raw = _with_raw_similarity(table, audited, data)
    retrieval = Retrieval(outcome.summary.test, None if clean is None else clean.test)
    result = _audit_summary(request, ranked, sources, table, retrieval, data)
    if others:
        own = ReseedVerdict(
            np.asarray(audited.pair_id), ranked.verdicts.suspected, result.estimated_mismatched_share
        )
        counts, result.reseeds = reseed_spread(own, others)
        table["suspected_in_reseeds"] = table["pair_id"].map(dict(zip(audited.pair_id, counts.tolist())))
    sample = audit_sample(table, options.seed, result.audit_id or "")
    result.sample_seed = options.seed
    plots = _plots(result, ranked, raw)
    timings.lap("ranking")
    division, pictures = ranked.verdicts.division, sources.pictures
    report = _report(request, table, result, plots, division, pictures, retrieval, sample, ranked.structure)
    result.seconds = round(time.time() - request.started, 1)
    audit = AuditResult(
        table,
        result,
        report.page,
        sources.refused,
        page_data=report.data,
        thumbs=report.thumbs,
        sample=sample,
        structure=ranked.structure,
    )
    claim_folder(request.out, "audit", AUDIT_OUTPUTS, overwrite=options.overwrite)
    audit.save(request.out, timings=timings)
    return audit


def _ranked(request: AuditRequest, run: TrainedRun, audited: AuditedPairs, timings: Timings) -> Ranked:
    """The verdicts, best matches and duplicates (lapped as ranking), then the map (lapped)."""
    options, paths = request.options, request.config.division.answers
    verdicts = Verdicts.of(audited, request.config.division.p_threshold, options.fdr)
    answers = _answers(paths, audited)
    if answers is not None:  # the answers reach the verdicts: every table, page and apply below
        verdicts = verdicts.answered(*answers, files=paths)
    matches = best_matches(run, pairs=audited.pairs, suspected=verdicts.suspected, progress=options.progress)
    duplicates = find_duplicates(
        audited.pairs.pairs.images,
        audited.pairs.pairs.captions,
        audited.pairs.image_of_caption,
        audited.split,
        train_split=request.config.data.train_split,
    )
    share = verdicts.calibration.share if verdicts.calibration is not None else None
    timings.lap("ranking")
    structure = join_findings(run, audited, duplicates, verdicts.suspected, share)
    timings.lap("join_errors")
    points = embedding_map(run, audited.pairs, seed=options.seed)
    run.release_texts()  # no caption is read after the map (a million MiniLM states: 1 GB)
    timings.lap("map")
    return Ranked(audited, verdicts, matches, duplicates, points, structure)


def _table(ranked: Ranked) -> pd.DataFrame:
    """``pairs.csv``'s rows (:func:`pair_table`) with each pair's place on the map."""
    audited, verdicts = ranked.audited, ranked.verdicts
    table = pair_table(
        audited,
        verdicts.mismatch,
        verdicts.suspected,
        ranked.matches,
        ranked.duplicates,
        verdicts.q_value,
        verdicts.fixed,
    )
    order = suspicion_order(audited.score, verdicts.mismatch, audited.pair_id)
    return table.assign(**map_columns(ranked.points, audited.pairs.image_of_caption, order))


def _with_raw_similarity(table: pd.DataFrame, audited: AuditedPairs, data: DataConfig) -> np.ndarray | None:
    """The pairs' raw similarity of aligned vectors (None where they are not), added to ``table``."""
    raw = raw_similarity(audited.pairs) if aligned(data) else None
    if raw is not None:
        table["raw_similarity"] = table["pair_id"].map(dict(zip(audited.pair_id, raw.round(6))))
    return raw


def _audit_summary(
    request: AuditRequest,
    ranked: Ranked,
    sources: Sources,
    table: pd.DataFrame,
    retrieval: Retrieval,
    data: DataConfig,
) -> AuditSummary:
    """The summary: counts and run, calibrated numbers, what was read and refused (``data``: the
    settings the run read the collection with), the parts."""
    audited, verdicts = ranked.audited, ranked.verdicts
    result = _summary(request, audited, verdicts, retrieval)
    fdr = request.options.fdr
    shares = calibration_summary(
        verdicts.calibration, audited.score, verdicts.suspected, fdr, verdicts.mismatch
    )
    result.estimated_mismatched_share, result.estimated_mismatched_share_interval = shares[:2]
    result.calibration, result.answers = shares[2], verdicts.answers
    n_refused = 0 if sources.refused is None else len(sources.refused)
    result.pairs_read, result.pairs_refused = len(audited.pairs) + n_refused, n_refused
    result.split_note, result.audit_id = sources.reader.split_note(data), audit_id(table)
    result.image_root = None if sources.files is None else str(sources.files)
    result.pictures = None if sources.pictures is None else str(sources.pictures)
    result.duplicates = DuplicateCounts(**ranked.duplicates.summary(audited.pairs.image_of_caption))
    result.map = ranked.points.method
    result.join_errors = _join_errors(ranked.structure)
    return result


def _join_errors(found: JoinFindings) -> JoinErrors:
    """The summary's part of the join errors (:mod:`mispair.audit.join_findings`)."""
    return JoinErrors(
        shifts=len(found.shifts),
        shifted_pairs=sum(s.pairs for s in found.shifts),
        repeated_captions=len(found.repeated_captions),
        repeated_caption_pairs=sum(r.pairs for r in found.repeated_captions),
        suspected_in_findings=found.suspected_in_shifts + found.suspected_in_repeated_captions,
        share_after_repair=found.share_after_repair,
        share_after_repair_interval=found.share_after_repair_interval,
        findings=found.sentences(),
    )


def _plots(result: AuditSummary, ranked: Ranked, raw: np.ndarray | None) -> list[Plot]:
    """The report's plots: the scores with their mixture and, where the truth is known, the
    detection curves (their numbers, and the raw similarity's, added to ``result``)."""
    audited, verdicts = ranked.audited, ranked.verdicts
    truth = audited.truly_mismatched
    plots = [score_plot(min_max_normalize(-audited.score), verdicts.division, truth)]
    known = truth if truth is not None and 0 < truth.sum() < len(truth) else None
    if known is not None:
        curves = detection_curves(audited.score, 1.0 - verdicts.mismatch, known, suspected=verdicts.suspected)
        result.detection = Detection(**curves.summary())
        plots += curve_plots(curves)
    if raw is not None:
        result.raw_score = RawScore(
            "raw_similarity", **(ranking_detection(raw, known) if known is not None else {})
        )
    return plots


def _report(
    request: AuditRequest,
    table: pd.DataFrame,
    result: AuditSummary,
    plots: list[Plot],
    division: Division,
    pictures: Path | None,
    retrieval: Retrieval,
    sample: pd.DataFrame,
    structure: JoinFindings,
) -> ReviewPage:
    """The review page of the ``top`` most suspect pairs (default: up to :data:`REPORT_PAIRS`),
    the first pairs of the random ``sample`` order (its "check a sample") and a card per join
    error of ``structure``."""
    options, top = request.options, request.options.top
    if top is None and len(table) > REPORT_PAIRS:
        options.log(
            f"audit: the report shows the {REPORT_PAIRS:,} most suspect of {len(table):,} pairs "
            "(--top N for another number); pairs.csv holds every pair"
        )
        top = REPORT_PAIRS
    tables = [("this run", retrieval.test)]
    tables += [("clean run", retrieval.clean_run_test)] if retrieval.clean_run_test else []
    return review_page(
        table,
        result,
        plots,
        division,
        tables,
        pictures,
        request.out,
        top=top,
        progress=options.progress,
        sample=sample,
        structure=structure,
    )


TrainedRuns = tuple[RunOutcome, TrainSummary | None]


def _train(request: AuditRequest, timings: Timings) -> TrainedRuns:
    """The audit's run (and its clean twin) trained or resumed, after every split's pictures were
    read: (its outcome, with its best checkpoint opened once, and the clean run's summary or None),
    their parts lapped in ``timings``."""
    config, o = request.config, request.options
    noisy = config.data.noise.rate > 0 or config.data.noise.file
    if o.clean_run and not noisy:
        o.log("note: --clean-run: nothing planted and no noise record, so no clean run to train")
    outcome = train_outcome(
        config, resume=o.resume, progress=o.progress, log=o.log, timings=timings, timeout=o.timeout
    )
    clean = None
    if o.clean_run and noisy:
        clean_config = _without_noise(config, request.out)
        clean = train_run(
            clean_config, resume=o.resume, progress=o.progress, log=o.log, timings=timings, timeout=o.timeout
        )
    return outcome, clean


def _reseeded(request: AuditRequest, timings: Timings) -> list[ReseedVerdict]:
    """The verdicts of the audit's run trained again with the next ``reseeds − 1`` seeds
    (:mod:`mispair.audit.reseeds`), each judged as :func:`_ranked` judges the audit's own (the
    answers fixed as there); empty in the processes but rank 0."""
    o, config = request.options, request.config
    found = []
    for k in range(1, o.reseeds):
        o.log(ProgressLine(f"audit: reseed {k} of {o.reseeds - 1} (train.seed={config.train.seed + k})"))
        again = reseeded_config(config, request.out, k)
        outcome = train_outcome(
            again, resume=o.resume, progress=o.progress, log=o.log, timings=timings, timeout=o.timeout
        )
        if not is_main_process():
            continue
        audited = audited_pairs(outcome.best, progress=o.progress, outcome=outcome)
        verdicts = Verdicts.of(audited, config.division.p_threshold, o.fdr)
        answers = _answers(config.division.answers, audited)
        if answers is not None:
            verdicts = verdicts.answered(*answers, files=config.division.answers)
        share = None if verdicts.calibration is None else float(verdicts.calibration.share)
        found.append(ReseedVerdict(np.asarray(audited.pair_id), verdicts.suspected, share))
    return found


def _without_noise(config: RunConfig, out: Path) -> RunConfig:
    """The same run on the collection as it is: no planted noise, in ``out/clean-run``."""
    clean = from_dict(config.to_dict())
    clean.data.noise.rate, clean.data.noise.file = 0.0, None
    clean.output = str(out / "clean-run")
    return clean


def _pictures(ids: list[str], data: DataConfig, images: str | Path | None) -> Path | None:
    if images is not None:
        found = picture_root(ids, [Path(images)])
        if found is None:
            raise ConfigError(
                f"--images {images}: does not hold a picture for every image id "
                f"(e.g. {ids[0]!r}), inside the folder"
            )
        return found
    return picture_root(ids, reader_of(data).picture_dirs(data))


def _summary(
    request: AuditRequest, audited: AuditedPairs, verdicts: Verdicts, retrieval: Retrieval
) -> AuditSummary:
    """The summary's counts and run, before the calibration and the parts are added."""
    root, config, plant = request.root, request.config, request.options.plant
    truth = None
    if audited.truly_mismatched is not None:
        truth = "the planted mismatches" if plant is not None else "the collection's noise record"
    check = None
    if plant is not None and audited.truly_mismatched is not None and audited.truly_mismatched.sum() > 0:
        check = self_check(audited.score, audited.truly_mismatched, verdicts.calibration)
    splits = {name: int((audited.split == name).sum()) for name in dict.fromkeys(audited.split.tolist())}
    return AuditSummary(
        collection=str(root.resolve()),
        threshold=round(verdicts.threshold, 6),
        collection_name=root.resolve().name,
        created=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        recipe=config.recipe,
        run=str(config.output_dir),
        pairs=len(audited.pairs),
        pairs_scored=int(np.isfinite(audited.score).sum()),
        pairs_by_split=splits,
        images=audited.pairs.pairs.n_images,
        suspected=int(verdicts.suspected.sum()),
        scored_by=config.division.scored_by,
        retrieval=retrieval,
        truth=truth,
        planted=plant,
        self_check=check,
        files=[name for name in OUTPUTS if name != "pairs.parquet" or _has_parquet()],
    )


def _has_parquet() -> bool:
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True

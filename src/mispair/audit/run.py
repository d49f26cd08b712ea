"""``mispair audit``: train a noise-robust model on a collection, rank every pair by how likely it
is mismatched (scores no model fitted), suggest a fix, and write ``pairs.csv``, ``report.html``
and ``summary.json``."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mispair.audit.atlas import MapPoints, embedding_map, map_columns
from mispair.audit.collection import audit_config, picture_root
from mispair.audit.duplicates import Duplicates, find_duplicates
from mispair.audit.ranking import (
    BestMatches,
    best_matches,
    others,
    score_division,
    suspicion_order,
)
from mispair.audit.raw_score import aligned, check_aligned, raw_similarity
from mispair.audit.report import Plot, ReviewPage, curve_plots, review_page, score_plot
from mispair.audit.result import LATER_OUTPUTS, OUTPUTS, AuditResult, audit_id
from mispair.audit.selfcheck import mismatched_share, self_check
from mispair.audit.summary import (
    AuditSummary,
    CalibrationPart,
    Detection,
    DuplicateCounts,
    RawScore,
    Retrieval,
)
from mispair.audit.thumbs import THUMBS
from mispair.config import DataConfig, RunConfig, from_dict
from mispair.data.batching import TrainingPairs
from mispair.data.loading import load_split
from mispair.data.readers import reader_of
from mispair.distributed import DEFAULT_TIMEOUT, is_main_process
from mispair.division import Division, min_max_normalize
from mispair.division.calibration import WEAK_SEPARATION, Calibration, Stratum, calibrate
from mispair.division.detection import detection_curves, ranking_detection
from mispair.division.scores import PAIR_SCORES_FILE, DivisionScores
from mispair.engine.assembly import other_splits
from mispair.engine.checks import check_run_config
from mispair.engine.run import RunOutcome, TrainSummary, train_outcome, train_run
from mispair.engine.trained import TrainedRun
from mispair.errors import ConfigError, DataError
from mispair.estimate.sample import sample_order
from mispair.output_folder import check_folder, claim_folder, holding
from mispair.sanity import check_finite
from mispair.timings import Timings

if TYPE_CHECKING:
    import pandas as pd

    from mispair.data.readers import Reader

AUDIT_PARTS = ("reading", "division", "training", "ranking", "map", "report")
"""The parts of an audit timed in ``summary.json``'s ``timings`` (seconds, with their ``total``):
reading the collection and the text encoder's features, the held-out scorers, the final run and
its test evaluation, ranking with the best matches, duplicates and detection scores, the map's
embedding and projection, and writing the report and tables."""

AUDIT_OUTPUTS = (*OUTPUTS, *LATER_OUTPUTS, THUMBS, "run", "clean-run", "input.parquet", "input_dataset")
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
    merged) fixed for the held-out scorers (``division.answers``: pairs judged correct trusted,
    mismatched ones never trained on) and, when they are the first pairs of this audit's random
    sample, estimated from (:meth:`AuditResult.estimate`, ``estimate.json``). Returns the
    :class:`AuditResult` it saved in ``out``.

    In processes started by torchrun (``mispair audit --nproc N``) every process calls it: the
    held-out scorers' folds are dealt over the processes and the final run trains a share of each
    batch (:func:`~mispair.engine.run.train_run`; collectives fail after ``timeout`` seconds);
    rank 0 alone then ranks the pairs and writes the report, and returns the result; the other
    processes return None.
    """
    started, timings = time.time(), Timings()
    options = AuditOptions(
        plant, seed, clean_run, images, top, resume, progress, log, overwrite, timeout, fdr, tuple(labels)
    )
    overrides = [*overrides, *answers_overrides(options.labels)]
    request = AuditRequest.checked(Path(data), Path(out), options, config_path, overrides, started)
    main, out = is_main_process(), request.out
    if main:
        check_folder(out, AUDIT_OUTPUTS, overwrite=overwrite)  # nothing written until the input is read
    with holding(out) if main else contextlib.nullcontext():  # a second audit into the folder refuses
        _check_vectors(request.config.data)
        outcome, clean = _train(request, timings)
        if not main:
            return None
        audit = _audit(request, outcome, clean, timings)
    if options.labels:
        _estimate_answers(audit, options, request.out)
    return audit


def answers_overrides(labels: Sequence[str | Path]) -> list[str]:
    """The run's ``division.answers`` for the labels files (absolute paths; each checked to be a
    readable labels file before anything trains)."""
    if not labels:
        return []
    from mispair.estimate.labels import read_labels

    for path in labels:
        read_labels(path)  # a missing or malformed file: one line now, not after the scorers
    return [f"division.answers={json.dumps([str(Path(p).resolve()) for p in labels])}"]


def _estimate_answers(audit: AuditResult, options: AuditOptions, out: Path) -> None:
    """The answers' estimate on this audit, written beside it, when they are a prefix of its
    sample; else one line saying why not."""
    try:
        found = audit.estimate(list(options.labels))
    except DataError as exc:
        options.log(f"audit: the answers are not an estimate of this audit ({exc})")
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

    def check(self, out: Path) -> None:
        """A one-line :class:`ConfigError` for an option no audit into ``out`` can take."""
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {out}: exists and is not a folder; give a folder for the audit's files")
        if self.top is not None and self.top < 0:
            raise ConfigError(f"--top: at least 0, got {self.top}")
        if not 0 < self.fdr < 1:
            raise ConfigError(f"--fdr: a false-discovery rate in (0, 1), got {self.fdr}")


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
        return None if self.calibration is None else self.calibration.q_value


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
    caption's best ``matches``, the ``duplicates`` and the map's ``points``."""

    audited: AuditedPairs
    verdicts: Verdicts
    matches: BestMatches
    duplicates: Duplicates
    points: MapPoints


def _audit(
    request: AuditRequest, outcome: RunOutcome, clean: TrainSummary | None, timings: Timings
) -> AuditResult:
    """Rank 0's audit of the trained run's ``outcome``: rank, summarize, write, each part lapped."""
    options, run = request.options, outcome.best
    audited = audited_pairs(run, progress=options.progress, outcome=outcome)
    check_finite(audited.score, "held-out pair scores", request.out / "run")  # before any result is written
    sources = Sources.of(audited, request.config.data, options.images)
    timings.lap("reading")
    options.log(
        f"audit: ranking {len(audited.pairs)} pairs and finding the best match of each image and caption"
    )
    ranked = _ranked(request, run, audited, timings)
    table = _table(ranked)  # not beside MiniLM
    timings.lap("ranking")
    raw = _with_raw_similarity(table, audited, request.config.data)
    retrieval = Retrieval(outcome.summary.test, None if clean is None else clean.test)
    result = _audit_summary(request, ranked, sources, table, retrieval)
    sample = sample_order(table["pair_id"].tolist(), options.seed)
    result.sample_seed = options.seed
    plots = _plots(result, ranked, raw)
    timings.lap("ranking")
    division, pictures = ranked.verdicts.division, sources.pictures
    report = _report(request, table, result, plots, division, pictures, retrieval, sample)
    result.seconds = round(time.time() - request.started, 1)
    audit = AuditResult(
        table,
        result,
        report.page,
        sources.refused,
        page_data=report.data,
        thumbs=report.thumbs,
        sample=sample,
    )
    claim_folder(request.out, "audit", AUDIT_OUTPUTS, overwrite=options.overwrite)
    audit.save(request.out, timings=timings)
    return audit


def _ranked(request: AuditRequest, run: TrainedRun, audited: AuditedPairs, timings: Timings) -> Ranked:
    """The verdicts, best matches and duplicates (lapped as ranking), then the map (lapped)."""
    options = request.options
    verdicts = Verdicts.of(audited, request.config.division.p_threshold, options.fdr)
    matches = best_matches(run, pairs=audited.pairs, suspected=verdicts.suspected, progress=options.progress)
    duplicates = find_duplicates(
        audited.pairs.pairs.images,
        audited.pairs.pairs.captions,
        audited.pairs.image_of_caption,
        audited.split,
        train_split=request.config.data.train_split,
    )
    timings.lap("ranking")
    points = embedding_map(run, audited.pairs, seed=options.seed)
    run.release_texts()  # no caption is read after the map (a million MiniLM states: 1 GB)
    timings.lap("map")
    return Ranked(audited, verdicts, matches, duplicates, points)


def _table(ranked: Ranked) -> pd.DataFrame:
    """``pairs.csv``'s rows (:func:`pair_table`) with each pair's place on the map."""
    audited, verdicts = ranked.audited, ranked.verdicts
    table = pair_table(
        audited, verdicts.mismatch, verdicts.suspected, ranked.matches, ranked.duplicates, verdicts.q_value
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
    request: AuditRequest, ranked: Ranked, sources: Sources, table: pd.DataFrame, retrieval: Retrieval
) -> AuditSummary:
    """The summary: counts and run, calibrated numbers, what was read and refused, the parts."""
    audited, verdicts, data = ranked.audited, ranked.verdicts, request.config.data
    result = _summary(request, audited, verdicts, retrieval)
    shares = calibration_summary(verdicts.calibration, audited.score, verdicts.suspected, request.options.fdr)
    result.estimated_mismatched_share, result.estimated_mismatched_share_interval = shares[:2]
    result.calibration = shares[2]
    n_refused = 0 if sources.refused is None else len(sources.refused)
    result.pairs_read, result.pairs_refused = len(audited.pairs) + n_refused, n_refused
    result.split_note, result.audit_id = sources.reader.split_note(data), audit_id(table)
    result.image_root = None if sources.files is None else str(sources.files)
    result.pictures = None if sources.pictures is None else str(sources.pictures)
    result.duplicates = DuplicateCounts(**ranked.duplicates.summary(audited.pairs.image_of_caption))
    result.map = ranked.points.method
    return result


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
) -> ReviewPage:
    """The review page of the ``top`` most suspect pairs (default: up to :data:`REPORT_PAIRS`)
    and the first pairs of the random ``sample`` order (its "check a sample")."""
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
    )


@dataclass
class AuditedPairs:
    """Every pair of an audited collection, as the run's models read them.

    ``pairs``: the training pairs (as the run paired them: planted swaps included) followed by the
    dev and test pairs; ``split [n]`` each pair's split; ``pair_id [n]`` its stable id (the
    reader's, else ``split/k``); ``score [n]`` its held-out score (higher = more likely matched);
    ``planted [n]`` bool, the swaps the audit planted (None without any); ``true_image [n]`` the
    image each caption was written for, when a noise record says so.
    """

    pairs: TrainingPairs
    split: np.ndarray
    pair_id: list[str]
    score: np.ndarray
    truly_mismatched: np.ndarray | None
    true_image: np.ndarray | None
    planted: bool
    null: tuple[np.ndarray, ...] | None = None
    """The decoys' scores of each stratum of ``score``: the training pairs' (the first
    ``n_train``), then the other splits' where they were scored; None where the run scored none."""
    n_train: int = 0

    def calibration(self) -> Calibration | None:
        """The pairs' calibrated numbers (:func:`~mispair.division.calibration.calibrate`), or
        None without decoys."""
        if self.null is None:
            return None
        parts = np.split(self.score, [self.n_train]) if len(self.null) == 2 else [self.score]
        return calibrate([Stratum(score, null) for score, null in zip(parts, self.null)])

    @property
    def image_ids(self) -> list[str]:
        ids = self.pairs.pairs.image_ids
        return ids if ids is not None else [str(i) for i in range(self.pairs.pairs.n_images)]


def audited_pairs(
    run: TrainedRun, *, progress: bool = False, outcome: RunOutcome | None = None
) -> AuditedPairs:
    """:class:`AuditedPairs` of a trained audit run (its division scored the other splits): from
    the ``outcome`` of the run that just trained it (its scores and splits as the run had them,
    nothing read again), else from the run's folder (``pair_scores.npz``, its collection)."""
    if outcome is None:
        scores = DivisionScores.read(run.provenance.folder / PAIR_SCORES_FILE)
        others = other_splits(run.config, run.data)
    else:
        scores, others = outcome.scores, outcome.others
    if scores is None:
        raise ConfigError("the audit's run made no held-out scores (set division.scored_by)")
    parts = [run.train] if others is None else [run.train, others]
    everything = TrainingPairs.join(parts)
    run.prepare_texts(everything.tokens, progress=progress)
    data = run.config.data
    split = [data.train_split] * len(run.train)
    if others is not None:
        if scores.others is None or len(scores.others) != len(others):
            raise ConfigError(
                f"{run.config.output_dir}: its scores do not cover the dev and test pairs; "
                "audit into a new folder"
            )
        split += [data.dev_split] * run.data.dev.n_captions
        split += [data.test_split] * (len(others) - run.data.dev.n_captions)
    score = scores.train if others is None else np.concatenate([scores.train, scores.others])
    noise, n_others = run.data.noise, len(everything) - len(run.train)
    null: tuple[np.ndarray, ...] | None = None
    if scores.null is not None and others is None:
        null = (scores.null,)
    elif scores.null is not None and scores.null_others is not None:
        null = (scores.null, scores.null_others)
    truth = true_image = None
    if noise is not None:
        truth = np.concatenate([noise.is_noisy, np.zeros(n_others, dtype=bool)])
        true_image = np.concatenate([noise.true_image, everything.image_of_caption[len(run.train) :]])
    return AuditedPairs(
        everything,
        np.array(split),
        _pair_ids(everything, split),
        score,
        truth,
        true_image,
        planted=data.noise.rate > 0,
        null=null,
        n_train=len(run.train),
    )


def _pair_ids(pairs: TrainingPairs, split: list[str]) -> list[str]:
    """The reader's pair ids, else ``split/k`` (``k`` the pair's place in its split)."""
    if pairs.pairs.pair_ids is not None:
        return list(pairs.pairs.pair_ids)
    seen: dict[str, int] = {}
    ids = []
    for name in split:
        ids.append(f"{name}/{seen.get(name, 0)}")
        seen[name] = seen.get(name, 0) + 1
    return ids


TrainedRuns = tuple[RunOutcome, TrainSummary | None]


def _train(request: AuditRequest, timings: Timings) -> TrainedRuns:
    """The audit's run (and its clean twin) trained or resumed, after every split's pictures were
    read: (its outcome, with its best checkpoint opened once, and the clean run's summary or None),
    their parts lapped in ``timings``."""
    config, o = request.config, request.options
    noisy = config.data.noise.rate > 0 or config.data.noise.file
    if o.clean_run and not noisy:
        o.log("audit: --clean-run: nothing planted and no noise record, so no clean run to train")
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


def pair_table(
    audited: AuditedPairs,
    mismatch: np.ndarray,
    suspected: np.ndarray,
    matches: BestMatches,
    duplicates: Duplicates,
    q_value: np.ndarray | None = None,
) -> pd.DataFrame:
    """Every pair as a row, from the most suspect to the least (``pairs.csv``): its scores, the
    :data:`~mispair.audit.ranking.SUGGESTIONS` best other captions for its image and other images
    for its caption, its duplicates (``duplicate_image_of``: the id of the first near-duplicate
    of its image or ""; ``same_caption_images``; ``leak``) and ``why`` it is suspect in words."""
    import pandas as pd

    ids, captions = audited.image_ids, audited.pairs.pairs.captions
    order = suspicion_order(audited.score, mismatch, audited.pair_id)
    suggested = Suggestions.of(audited, matches, order)
    columns: dict[str, Any] = {
        "pair_id": [audited.pair_id[k] for k in order],
        "rank": np.arange(1, len(order) + 1),
        "split": audited.split[order],
        "image_id": [ids[i] for i in audited.pairs.image_of_caption[order]],
        "caption": [captions[k] for k in order],
        "mismatch_probability": mismatch[order].round(6),
        "suspected": suspected[order],
        "q_value": (np.full(len(order), np.nan) if q_value is None else q_value[order]).round(6),
        "held_out_score": audited.score[order].round(6),
        "pair_similarity": matches.pair_score[order].round(6),
    }
    columns.update(suggested.columns(audited))
    columns.update(_duplicate_columns(audited, duplicates, order))
    probability = None if q_value is None else mismatch
    columns["why"] = _reasons(audited, order, matches, duplicates, suggested, probability)
    if audited.truly_mismatched is not None and audited.true_image is not None:
        columns["truly_mismatched"] = audited.truly_mismatched[order]
        columns["true_image_id"] = [ids[i] for i in audited.true_image[order]]
    return pd.DataFrame(columns)


@dataclass(frozen=True)
class Suggestions:
    """In the table's ``order``: the best other captions of each pair's image (``captions``,
    ``[n, SUGGESTIONS]`` indices, -1: none) with their ``caption_scores``, and the best other
    images of its caption (``images``) with their ``image_scores``."""

    captions: np.ndarray
    caption_scores: np.ndarray
    images: np.ndarray
    image_scores: np.ndarray

    @classmethod
    def of(cls, audited: AuditedPairs, matches: BestMatches, order: np.ndarray) -> Suggestions:
        paired = audited.pairs.image_of_caption[order]
        captions, caption_scores = others(matches.captions[paired], matches.caption_scores[paired], order)
        images, image_scores = others(matches.images[order], matches.image_scores[order], paired)
        return cls(captions, caption_scores, images, image_scores)

    def columns(self, audited: AuditedPairs) -> dict[str, Any]:
        """``suggested_caption_{n}`` and its score, then ``suggested_image_id_{n}`` and its score."""
        ids, captions = audited.image_ids, audited.pairs.pairs.captions
        columns: dict[str, Any] = {}
        for n in range(self.captions.shape[1]):
            columns[f"suggested_caption_{n + 1}"] = [
                captions[c] if c >= 0 else "" for c in self.captions[:, n]
            ]
            columns[f"suggested_caption_score_{n + 1}"] = self.caption_scores[:, n].round(6)
        for n in range(self.images.shape[1]):
            columns[f"suggested_image_id_{n + 1}"] = [ids[i] if i >= 0 else "" for i in self.images[:, n]]
            columns[f"suggested_image_score_{n + 1}"] = self.image_scores[:, n].round(6)
        return columns


def _duplicate_columns(audited: AuditedPairs, duplicates: Duplicates, order: np.ndarray) -> dict[str, Any]:
    """``duplicate_image_of`` (the first near-duplicate's image id or ""), ``same_caption_images``
    and ``leak``, in the table's ``order``."""
    ids, twin = audited.image_ids, duplicates.duplicate_of[audited.pairs.image_of_caption[order]]
    return {
        "duplicate_image_of": [ids[i] if i >= 0 else "" for i in twin],
        "same_caption_images": duplicates.same_caption_images[order],
        "leak": duplicates.leak[order],
    }


def _reasons(
    audited: AuditedPairs,
    order: np.ndarray,
    matches: BestMatches,
    duplicates: Duplicates,
    suggested: Suggestions,
    probability: np.ndarray | None,
) -> list[str]:
    """:func:`why` of each pair, in the table's ``order``."""
    ids, captions = audited.image_ids, audited.pairs.pairs.captions
    twins = duplicates.duplicate_of[audited.pairs.image_of_caption[order]]
    reasons = zip(
        order, suggested.captions[:, 0], suggested.caption_scores[:, 0], matches.pair_score[order], twins
    )
    return [
        why(
            int(matches.better_images[k]),
            captions[c] if c >= 0 else None,
            score > pair,
            at_least=matches.better_cap is not None and matches.better_images[k] >= matches.better_cap,
            among_suspects=matches.suspects_only,
            duplicate_of=ids[twin] if twin >= 0 else "",
            same_caption=int(duplicates.same_caption_images[k]),
            leak=bool(duplicates.leak[k]),
            probability=None if probability is None else float(probability[k]),
        )
        for k, c, score, pair, twin in reasons
    ]


def why(
    better_images: int,
    best_caption: str | None,
    caption_fits_better: bool,
    *,
    at_least: bool = False,
    among_suspects: bool = False,
    duplicate_of: str = "",
    same_caption: int = 0,
    leak: bool = False,
    probability: float | None = None,
) -> str:
    """Why a pair may be mismatched, in words: how many other images its caption fits better
    (``at_least``: that many or more), the caption its image fits best when that is not its own
    (``among_suspects``: of the suspected pairs' captions), and its duplicates. Given its
    calibrated mismatch ``probability``, the words start from it (:func:`verdict`), and a pair
    below :data:`LIKELY` is not explained by the images its caption fits better (a correct pair
    with a middling score reads as uncertain)."""
    if probability is not None:
        details = why(
            better_images,
            best_caption,
            caption_fits_better,
            at_least=at_least,
            among_suspects=among_suspects,
            duplicate_of=duplicate_of,
            same_caption=same_caption,
            leak=leak,
        ).split("; ")
        kept = details if probability >= LIKELY else details[2:]
        return "; ".join([verdict(probability), *kept])
    fits = (
        f"this caption fits {'at least ' if at_least else ''}{better_images} other "
        f"image{'s' if better_images != 1 else ''} better"
        if better_images
        else "no other image fits this caption better"
    )
    if best_caption is None or not caption_fits_better:
        words = [fits, f"no {'suspect' if among_suspects else 'other'} caption fits this image better"]
    else:
        shown = best_caption if len(best_caption) <= 60 else best_caption[:59] + "…"
        among = "of the suspect captions, " if among_suspects else ""
        words = [fits, f"{among}this image fits '{shown}' best"]
    if duplicate_of:
        words.append(f"its image nearly duplicates {duplicate_of}")
    if same_caption:
        carry = "other image carries" if same_caption == 1 else "other images carry"
        words.append(f"{same_caption} {carry} the same caption")
    if leak:
        words.append("it repeats a training pair (a leak)")
    return "; ".join(words)


LIKELY = 0.5
"""From this mismatch probability on, a pair is more likely mismatched than not."""


def verdict(probability: float) -> str:
    """A calibrated mismatch probability in words."""
    if probability >= 0.9:
        words = "scores like a caption taken from another picture"
    elif probability >= LIKELY:
        words = "more likely mismatched than not"
    elif probability >= 0.1:
        words = "uncertain: scores between matched pairs and captions of other pictures"
    else:
        words = "scores like a matched pair"
    return f"{words} (mismatch probability {probability:.2f})"


def calibration_summary(
    calibration: Calibration | None, score: np.ndarray, suspected: np.ndarray, fdr: float
) -> tuple[float, tuple[float, float], CalibrationPart]:
    """The summary's calibrated numbers: the share of pairs as unrelated as a caption taken
    from another picture with its interval (from the decoys; without decoys, the mixture's
    estimate over the held-out ``score``, marked so), and how they were made, with the estimated
    error rates of dropping the ``suspected`` pairs."""
    if calibration is None:
        share = mismatched_share(score)
        return share.estimate, (share.low, share.high), CalibrationPart("mixture", MIXTURE_NOTE)
    false_drops, kept_mismatched = calibration.drop_errors(suspected)
    part = CalibrationPart(
        "decoys",
        separation_note(calibration),
        decoys=calibration.decoys,
        level=calibration.level,
        lam=calibration.lam,
        separation_auc=round(calibration.separation_auc, 6),
        share_upper_bound=round(calibration.share_bound, 6),
        fdr=fdr,
        estimated_false_drop_share=round(false_drops, 6),
        estimated_kept_mismatched_share=round(kept_mismatched, 6),
    )
    interval = (round(calibration.share_low, 6), round(calibration.share_high, 6))
    return round(calibration.share, 6), interval, part


MIXTURE_NOTE = (
    "no decoy pairs were scored (this run's division scores have none): the share and the "
    "probabilities are a two-component mixture's, not calibrated"
)


def separation_note(calibration: Calibration) -> str:
    """What the numbers can be trusted for, in words."""
    width = calibration.share_high - calibration.share_low
    if calibration.share_high >= 1:
        return (
            f"the share's {calibration.level:.0%} interval reaches 100%: the held-out models cannot "
            "tell your pairs from captions of other pictures here, so these numbers say little "
            "(more pairs, or better embeddings, would let them)"
        )
    if calibration.share_low <= 0:
        return (
            f"the share's {calibration.level:.0%} interval reaches 0: this collection may hold no "
            "mismatched pair, so none is suspected at any --fdr (the probabilities still rank the "
            "pairs: review the top of the list)"
        )
    if calibration.separation_auc < WEAK_SEPARATION:
        return (
            "the held-out models barely tell the pairs from captions of other pictures here "
            f"(estimated AUC {calibration.separation_auc:.2f}): the share is uncertain and few pairs "
            "can be suspected at a low error"
        )
    if width > 0.2:
        return f"the share's interval is wide ({width:.0%}): few pairs, or a weak separation"
    return (
        f"the held-out models tell matched pairs from captions of other pictures with an "
        f"estimated AUC of {calibration.separation_auc:.2f}"
    )


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

"""``mispair audit``: train a noise-robust model on a collection, rank every pair by how likely it
is mismatched (scores no model fitted), suggest a fix, and write ``pairs.csv``, ``report.html``
and ``summary.json``."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from mispair.atomic import atomic_text, atomic_write
from mispair.audit.collection import PICTURE_DIRS, audit_config, picture_root, thumbnail_uri
from mispair.audit.ranking import (
    BestMatches,
    best_matches,
    detection_curves,
    score_division,
    suspicion_order,
)
from mispair.audit.report import curve_plots, render_report, score_plot
from mispair.config import RunConfig, from_dict
from mispair.data.folder import UnreadableImageWarning
from mispair.data.loading import load_split
from mispair.division import Division, min_max_normalize
from mispair.engine.export import TrainedRun, load_trained_run, pairs_csv
from mispair.engine.run import train_run
from mispair.errors import ConfigError, DataError

OUTPUTS = ("summary.json", "report.html", "pairs.csv", "pairs.parquet")
"""What the audit writes into its folder (``summary.json`` last: its presence means complete)."""


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
    top: int = 100,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Audit the training pairs of the collection at ``data`` into the folder ``out``.

    Trains the audit's run (:data:`~mispair.audit.collection.AUDIT_RUN`, or ``config_path``, with
    ``overrides``) in ``out/run`` — resumable: an interrupted audit continues, a finished one is
    reused — and, with ``clean_run``, the same run without the planted noise in ``out/clean-run``.
    ``plant`` swaps that share of the pairs first and scores the audit against them. ``images``
    is where the pictures of a precomputed collection lie (default: its folder, then the Tux
    Paint and OpenClipart package folders). Returns the summary written to ``summary.json``.
    """
    root, out, started = Path(data), Path(out), time.time()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a folder")
    if top < 0:
        raise ConfigError(f"--top: at least 0, got {top}")
    config = audit_config(root, out, config_path=config_path, overrides=overrides, plant=plant, seed=seed)
    summary, clean, run = _train(config, out, clean_run, progress, log)
    pictures = _pictures(run, root, images, config.data.source)
    log(f"audit: ranking {len(run.train)} pairs and finding the best match of each image and caption")
    matches = best_matches(run, progress=progress)
    score = run.division_score
    if score is None:
        raise ConfigError("the audit's run made no held-out scores (set division.scores)")
    division = score_division(score)
    clean_prob = run.clean_prob if run.clean_prob is not None else division.clean_prob
    table = _pair_rows(run, score, clean_prob, matches)
    result = _summary(run, root, config, division, clean_prob, plant, summary, clean)
    truth = run.data.noise.is_noisy if run.data.noise is not None else None
    plots = [score_plot(min_max_normalize(-score), division, truth)]
    if truth is not None and 0 < truth.sum() < len(truth):
        curves = detection_curves(score, clean_prob, truth)
        result["detection"] = curves.summary()
        plots += curve_plots(curves)
    retrieval = [("this run", summary["test"])] + ([("clean run", clean["test"])] if clean else [])
    page = render_report(result, _report_rows(table[:top], pictures), plots, division, retrieval)
    result["seconds"] = round(time.time() - started, 1)
    _write_outputs(out, table, page, result)
    return result


TrainedRuns = tuple[dict[str, Any], dict[str, Any] | None, TrainedRun]


def _train(config: RunConfig, out: Path, clean_run: bool, progress: bool,
           log: Callable[[str], None]) -> TrainedRuns:  # fmt: skip
    """The audit's run (and its clean twin) trained or resumed, after every split's pictures were
    read: (its summary, the clean run's or None, the trained run loaded)."""
    noisy = config.data.noise.rate > 0 or config.data.noise.file
    if clean_run and not noisy:
        log("audit: --clean-run: nothing planted and no noise record, so no clean run to train")
    with _unreadable_images_are_errors():
        load_split(config.data, config.data.test_split)  # train and dev are read by train_run
        summary = train_run(config, progress=progress, log=log)
        clean = None
        if clean_run and noisy:
            clean = train_run(_without_noise(config, out), progress=progress, log=log)
        return summary, clean, load_trained_run(config, progress=progress)


@contextlib.contextmanager
def _unreadable_images_are_errors() -> Iterator[None]:
    """An image file that is not a picture is a one-line error in an audit (``train`` skips it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreadableImageWarning)
        try:
            yield
        except UnreadableImageWarning as exc:
            raise DataError(str(exc).replace("skipped", "found")) from None


def _without_noise(config: RunConfig, out: Path) -> RunConfig:
    """The same run on the collection as it is: no planted noise, in ``out/clean-run``."""
    clean = from_dict(config.to_dict())
    clean.data.noise.rate, clean.data.noise.file = 0.0, None
    clean.output = str(out / "clean-run")
    return clean


def _pictures(run: TrainedRun, root: Path, images: str | Path | None, source: str) -> Path | None:
    ids = run.image_ids
    if images is not None:
        found = picture_root(ids, [Path(images)])
        if found is None:
            raise ConfigError(f"--images {images}: does not hold a picture for every image id "
                              f"(e.g. {ids[0]!r}), inside the folder")  # fmt: skip
        return found
    return picture_root(ids, [root] if source == "folder" else [root, *PICTURE_DIRS])


def _pair_rows(run: TrainedRun, score: np.ndarray, clean_prob: np.ndarray,
               matches: BestMatches) -> list[dict[str, Any]]:  # fmt: skip
    """Every training pair as a row, from the most suspect to the least."""
    ids, captions, paired = run.image_ids, run.data.train.captions, run.train.image_of_caption
    noise = run.data.noise
    rows = []
    for rank, k in enumerate(suspicion_order(score), start=1):
        image, best_caption, best_image = paired[k], matches.caption[paired[k]], matches.image[k]
        row: dict[str, Any] = {
            "rank": rank, "caption_index": int(k), "image_id": ids[image], "caption": captions[k],
            "score": round(float(score[k]), 6), "clean_prob": round(float(clean_prob[k]), 6),
            "suspected": bool(clean_prob[k] <= 0.5),
            "pair_similarity": round(float(matches.pair_score[k]), 6),
            "suggested_caption_index": int(best_caption), "suggested_caption": captions[best_caption],
            "suggested_caption_score": round(float(matches.caption_score[image]), 6),
            "suggested_image_id": ids[best_image],
            "suggested_image_score": round(float(matches.image_score[k]), 6),
        }  # fmt: skip
        if noise is not None:
            row["truly_mismatched"] = bool(noise.is_noisy[k])
            row["true_image_id"] = ids[noise.true_image[k]]
        rows.append(row)
    return rows


def _report_rows(rows: list[dict[str, Any]], pictures: Path | None) -> list[dict[str, Any]]:
    """The report's top suspects: the table's rows with thumbnails (each picture read once)."""
    thumbnails: dict[str, str] = {}

    def thumbnail(image_id: str) -> str:
        if pictures is None:
            return ""
        if image_id not in thumbnails:
            thumbnails[image_id] = thumbnail_uri(pictures / image_id)
        return thumbnails[image_id]

    return [{**row, "thumbnail": thumbnail(row["image_id"]),
             "suggested_thumbnail": thumbnail(row["suggested_image_id"]),
             "suggested_caption_is_own": row["suggested_caption"] == row["caption"],
             "suggested_image_is_own": row["suggested_image_id"] == row["image_id"]}
            for row in rows]  # fmt: skip


def _summary(run: TrainedRun, root: Path, config: RunConfig, division: Division, clean_prob: np.ndarray,
             plant: float | None, summary: dict[str, Any],
             clean: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    weights = division.params.get("weights", [])
    suspected = int((clean_prob <= 0.5).sum())
    truth = None
    if run.data.noise is not None:
        truth = "the planted mismatches" if plant is not None else "the collection's noise record"
    return {
        "collection": str(root.resolve()), "collection_name": root.resolve().name,
        "created": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "recipe": config.recipe, "run": str(config.output_dir), "pairs": len(run.train),
        "images": run.train.pairs.n_images,
        "estimated_mismatched_share": float(weights[1]) if len(weights) == 2 else suspected / len(clean_prob),
        "suspected": suspected,
        "division": {"scores": config.division.scores, "mixture": division.params},
        "retrieval": {"test": summary["test"], "clean_run_test": clean["test"] if clean else None},
        "truth": truth, "planted": plant, "detection": None,
        "files": [name for name in OUTPUTS if name != "pairs.parquet" or _has_parquet()],
    }  # fmt: skip


def _has_parquet() -> bool:
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def _write_outputs(out: Path, table: list[dict[str, Any]], page: str, summary: dict[str, Any]) -> None:
    """Replace the folder's audit files: the old ones go first, ``summary.json`` comes last, so
    the folder never holds a mix of two audits or a report without its summary."""
    import json

    for name in OUTPUTS:
        (out / name).unlink(missing_ok=True)
    atomic_text(out / "pairs.csv", pairs_csv(table))
    if _has_parquet():
        import pyarrow
        import pyarrow.parquet

        frame = pyarrow.Table.from_pylist(table)
        atomic_write(out / "pairs.parquet", lambda handle: pyarrow.parquet.write_table(frame, handle))
    atomic_text(out / "report.html", page)
    atomic_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")

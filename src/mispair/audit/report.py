"""The audit's ``report.html``: an offline review page over every pair. The page holds the summary
and the plots (inlined as ``data:`` URIs); the pairs come from ``pairs.js`` and the thumbnails
from ``thumbs/`` beside it (:mod:`mispair.audit.page_data`, :mod:`mispair.audit.thumbs`). Its
content security policy allows no request off the page's folder and no script but ``pairs.js`` and
the page's own (``report.js``, allowed by its hash); Jinja2 renders with autoescape on and the
script sets every caption and id as text: they are untrusted."""

from __future__ import annotations

import base64
import hashlib
import io
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mispair.audit.page_data import FDR, page_data, sample_design, sample_rows
from mispair.audit.page_findings import finding_cards
from mispair.audit.result import audit_id
from mispair.audit.thumbs import THUMBS, write_thumbnails
from mispair.division import Division
from mispair.division.detection import DetectionCurves

if TYPE_CHECKING:
    import pandas as pd

    from mispair.audit.join_findings import JoinFindings
    from mispair.audit.summary import AuditSummary

METRIC_KEYS = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10", "rsum")


def script_hash(script: str) -> str:
    """The CSP source ``'sha256-…'`` that allows exactly ``script`` to run."""
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


@dataclass
class Plot:
    alt: str
    uri: str


@dataclass
class ReviewPage:
    """The report of an audit: ``page`` (``report.html``), ``data`` (``pairs.js``), with the
    thumbnails already written into ``folder / thumbs``."""

    page: str
    data: str
    thumbs: Path


def review_page(
    table: pd.DataFrame,
    summary: AuditSummary,
    plots: list[Plot],
    division: Division,
    retrieval: list[tuple[str, dict[str, float]]],
    pictures: Path | None,
    folder: Path,
    *,
    top: int | None = None,
    progress: bool = False,
    sample: pd.DataFrame | None = None,
    structure: JoinFindings | None = None,
) -> ReviewPage:
    """The report over the ranked ``table`` (``pairs.csv``'s rows; its ``top`` first, default
    all), with the thumbnails of the pictures in ``pictures`` written into ``folder / thumbs``;
    ``summary`` carries the table's ``audit_id`` (:func:`~mispair.audit.result.audit_id`);
    ``sample``: the audit's random order (``pair_id``, ``order``, ``stratum``), whose first
    :data:`~mispair.audit.page_data.SAMPLE_SHOWN` pairs the page's "check a sample" walks;
    ``structure``: the join errors found, each shown on a card with one decision for all its
    pairs (:mod:`mispair.audit.page_findings`)."""
    shown = table if top is None else table.head(top)
    judged = None if sample is None else sample_rows(table, sample)
    cards = None if structure is None else finding_cards(structure, table)
    images = report_images(shown) + ([] if judged is None else judged["image_id"].astype(str).tolist())
    images += [] if cards is None else cards.images()
    thumbnails = write_thumbnails(list(dict.fromkeys(images)), pictures, folder, progress=progress)
    audit = audit_id(table)
    rest = table.iloc[len(shown) :]
    data = page_data(
        shown,
        thumbnails,
        audit=audit,
        threshold=summary.threshold,
        rest=rest,
        sample=judged,
        design=None if sample is None else sample_design(table, sample, fdr=page_fdr(summary)),
        findings=cards,
    )
    duplicates = "duplicate_image_of" in table or "same_caption_images" in table
    fields = {**summary.to_dict(), "audit_id": audit}
    page = render_report(
        fields, plots, division, retrieval, shown=len(shown), has_why="why" in table, duplicates=duplicates
    )
    return ReviewPage(page, data, folder / THUMBS)


def page_fdr(summary: AuditSummary) -> float:
    """The false-discovery rate the page proves the drop at: the audit's ``--fdr`` (its
    calibration's; :data:`~mispair.audit.page_data.FDR` where the summary records none)."""
    calibration = summary.calibration
    fdr = None if calibration is None else calibration.fdr
    return float(fdr) if fdr else FDR


def report_images(table: pd.DataFrame) -> list[str]:
    """Every image the report's rows show: their own, the suggested ones and the ones they
    duplicate (columns ``image_id``, ``suggested_image_id[_k]``, ``duplicate_image_of``)."""
    names = [
        c
        for c in table.columns
        if c == "image_id" or c.startswith("suggested_image_id") or c == "duplicate_image_of"
    ]
    values = (v for name in names for v in table[name].tolist())
    return [str(v) for v in dict.fromkeys(values) if isinstance(v, str) and v]


def render_report(
    summary: dict[str, Any],
    plots: list[Plot],
    division: Division,
    retrieval: list[tuple[str, dict[str, float]]],
    *,
    shown: int,
    has_why: bool = False,
    duplicates: bool = False,
) -> str:
    """The report page for ``summary`` (as written to summary.json, with its ``audit_id``), the
    ``plots``, the score ``division`` and the ``retrieval`` metrics (label, test metrics); ``shown``
    pairs are in ``pairs.js``, ``has_why`` when they say why in words, ``duplicates`` when the
    table has duplicate columns (a filter for them)."""
    import jinja2

    package = resources.files("mispair.audit")
    template = package.joinpath("report.html.j2").read_text(encoding="utf-8")
    script = package.joinpath("report.js").read_text(encoding="utf-8")
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    components = [
        (name, mean, float(np.sqrt(var)), weight) for name, mean, var, weight in _components(division)
    ]
    return environment.from_string(template).render(
        summary=summary,
        plots=plots,
        components=components,
        retrieval=retrieval,
        metric_keys=METRIC_KEYS,
        shown=shown,
        has_why=has_why,
        duplicates=duplicates,
        script=jinja2.filters.Markup(script),
        script_hash=script_hash(script),
    )


def score_plot(suspicion: np.ndarray, division: Division, is_noisy: np.ndarray | None) -> Plot:
    """Histogram of the normalised suspicion ``[n_pairs]`` (split by the truth when known) with
    the fitted mixture's two Gaussian densities."""
    figure, axes = _figure()
    bins = np.linspace(0, 1, 41)
    if is_noisy is None:
        axes.hist(suspicion, bins=bins, density=True, color="#999", alpha=0.6, label="pairs")
    else:
        axes.hist(
            [suspicion[~is_noisy], suspicion[is_noisy]],
            bins=bins,
            density=True,
            stacked=True,
            color=["#4a8", "#d55"],
            alpha=0.6,
            label=["matched", "mismatched"],
        )
    grid = np.linspace(0, 1, 400)
    for (name, mean, var, weight), color in zip(_components(division), ("#163", "#811")):
        density = weight * np.exp(-((grid - mean) ** 2) / (2 * var)) / np.sqrt(2 * np.pi * var)
        axes.plot(grid, density, color=color, lw=2, label=f"{name} component")
    axes.set_xlabel("suspicion (normalised, 1 = most suspect)")
    axes.set_ylabel("density")
    axes.legend(fontsize=8)
    return Plot("histogram of the suspicion with the fitted mixture", _png_uri(figure))


def curve_plots(curves: DetectionCurves) -> list[Plot]:
    """The ROC and precision–recall curves of the ranking against the known mismatches."""
    figure, axes = _figure()
    axes.plot(*curves.roc, color="#c33", lw=2, label=f"AUC {curves.auc:.3f}")
    axes.plot([0, 1], [0, 1], color="#aaa", ls="--", lw=1, label="chance")
    axes.set_xlabel("matched pairs flagged (FPR)")
    axes.set_ylabel("mismatched pairs found (TPR)")
    axes.legend(fontsize=8)
    roc = Plot("ROC curve of the ranking", _png_uri(figure))
    figure, axes = _figure()
    axes.plot(*curves.pr, color="#36c", lw=2, label=f"average precision {curves.average_precision:.3f}")
    axes.axhline(curves.mismatched / curves.pairs, color="#aaa", ls="--", lw=1, label="chance")
    axes.set_xlabel("recall (mismatched pairs found)")
    axes.set_ylabel("precision")
    axes.set_ylim(0, 1.02)
    axes.legend(fontsize=8)
    return [roc, Plot("precision-recall curve of the ranking", _png_uri(figure))]


def _components(division: Division) -> list[tuple[str, float, float, float]]:
    """(name, mean, variance, weight) of the division's Gaussian components, trusted first."""
    params = division.params
    return list(
        zip(
            ("trusted", "suspected"),
            params.get("means", []),
            params.get("variances", []),
            params.get("weights", []),
        )
    )


def _figure():
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(3.9, 3.0), dpi=100)
    return figure, axes


def _png_uri(figure) -> str:
    from matplotlib import pyplot

    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    pyplot.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")

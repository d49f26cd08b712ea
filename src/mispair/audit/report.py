"""The audit's ``report.html``: one self-contained offline page (plots and thumbnails inlined as
``data:`` URIs, a content security policy that allows no request and only the page's own script),
rendered by Jinja2 with autoescape on: captions and ids are untrusted text."""

from __future__ import annotations

import base64
import hashlib
import io
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from mispair.audit.ranking import DetectionCurves
from mispair.division import Division

METRIC_KEYS = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10", "rsum")

SORT_AND_FILTER = """(function () {
  var table = document.getElementById("suspects"), body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var filter = document.getElementById("filter"), onlySuspected = document.getElementById("only-suspected");
  function cellValue(row, k) {
    var cell = row.cells[k];
    return cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent;
  }
  function apply() {
    var query = filter.value.toLowerCase(), shown = 0;
    rows.forEach(function (row) {
      var match = row.textContent.toLowerCase().indexOf(query) !== -1;
      row.hidden = !(match && (!onlySuspected.checked || row.getAttribute("data-suspected") === "1"));
      if (!row.hidden) { shown += 1; }
    });
    document.getElementById("shown").textContent = String(shown);
  }
  table.tHead.addEventListener("click", function (event) {
    var th = event.target.closest("th");
    if (!th) { return; }
    var k = th.cellIndex, numeric = th.getAttribute("data-type") === "number";
    var dir = th.getAttribute("data-dir") === "asc" ? "desc" : "asc";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("data-dir"); });
    th.setAttribute("data-dir", dir);
    rows.sort(function (a, b) {
      var x = cellValue(a, k), y = cellValue(b, k);
      var order = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
      return dir === "asc" ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
  filter.addEventListener("input", apply);
  onlySuspected.addEventListener("change", apply);
  document.body.setAttribute("data-ready", "1");
})();"""


def script_hash(script: str) -> str:
    """The CSP source ``'sha256-…'`` that allows exactly ``script`` to run."""
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


@dataclass
class Plot:
    alt: str
    uri: str


def render_report(summary: dict[str, Any], rows: list[dict[str, Any]], plots: list[Plot],
                  division: Division, retrieval: list[tuple[str, dict[str, float]]]) -> str:  # fmt: skip
    """The report page for ``summary`` (as written to summary.json), the top suspects ``rows``,
    the ``plots``, the score ``division`` and the ``retrieval`` metrics (label, test metrics)."""
    import jinja2

    template = resources.files("mispair.audit").joinpath("report.html.j2").read_text(encoding="utf-8")
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    components = [(name, mean, float(np.sqrt(var)), weight)
                  for name, mean, var, weight in _components(division)]
    return environment.from_string(template).render(
        summary=summary, rows=rows, plots=plots, components=components, retrieval=retrieval,
        metric_keys=METRIC_KEYS, script=jinja2.filters.Markup(SORT_AND_FILTER),
        script_hash=script_hash(SORT_AND_FILTER),
    )  # fmt: skip


def score_plot(suspicion: np.ndarray, division: Division, is_noisy: np.ndarray | None) -> Plot:
    """Histogram of the normalised suspicion ``[n_pairs]`` (split by the truth when known) with
    the fitted mixture's two Gaussian densities."""
    figure, axes = _figure()
    bins = np.linspace(0, 1, 41)
    if is_noisy is None:
        axes.hist(suspicion, bins=bins, density=True, color="#999", alpha=0.6, label="pairs")
    else:
        axes.hist([suspicion[~is_noisy], suspicion[is_noisy]], bins=bins, density=True, stacked=True,
                  color=["#4a8", "#d55"], alpha=0.6, label=["matched", "mismatched"])  # fmt: skip
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
    return list(zip(("trusted", "suspected"), params.get("means", []), params.get("variances", []),
                    params.get("weights", [])))  # fmt: skip


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

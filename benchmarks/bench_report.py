"""The audit's report at 100K pairs: bytes per pair and time in headless Chromium, beside the
report it replaces (the top 100 suspects, thumbnails inlined as base64).

A synthetic audit (:func:`mispair.audit.synthetic.synthetic_audit`: no training, random held-out
scores, ``--images`` generated pictures, three suggestions per pair, ``why`` and duplicate
columns) gives the table; its report is timed written into a new folder (every thumbnail
written) and again into the same folder (thumbnails reused, as when an audit reruns). The baseline is the
renderer of commit ``--baseline`` (its ``report.py`` and template, read from git) on the same
table's top 100 rows, each thumbnail the same 96-pixel JPEG inlined. Chromium (Debian's, driven
by playwright) opens each page from its folder: time to first render (the page's script has run
and drawn its first rows), to reach the last page (new report: its "last" button), and to filter
every pair by a text search.

Run (results in ``benchmarks/results/bench_report.txt``)::

    PYTHONPATH=src python benchmarks/bench_report.py --pairs 100000 --images 20000
"""

from __future__ import annotations

import argparse
import base64
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

from mispair.audit.ranking import score_division
from mispair.audit.report import METRIC_KEYS, review_page
from mispair.audit.synthetic import synthetic_audit
from mispair.audit.thumbs import THUMBS, thumbnail_name

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--images", type=int, default=20_000)
    parser.add_argument("--baseline", default="e5d7a7c", help="git revision of the report it replaces")
    parser.add_argument("--repeats", type=int, default=3, help="browser timings: the median of this many")
    parser.add_argument("--out", help="also write the results to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        result = synthetic_audit(folder, pairs=args.pairs, images=args.images)
        new = folder / "audit"
        first, again = _render_times(result, folder)
        old = folder / "baseline" / "report.html"
        old_seconds = _baseline(result, new, old, args.baseline)
        query = result.pairs["caption"].iloc[len(result.pairs) // 2]
        new_times = _browse(new / "report.html", query, args.repeats, last=True)
        old_times = _browse(old, query, args.repeats, last=False)
        lines = _table(args, new, old, result, first, again, old_seconds, new_times, old_times)
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


def _render_times(result, folder: Path) -> tuple[float, float]:
    """Seconds to write the report of ``result`` into a new folder (every thumbnail written), and
    again into the same folder (the thumbnails reused)."""
    division = score_division(result.pairs["held_out_score"].to_numpy())
    retrieval = [("this run", dict.fromkeys(METRIC_KEYS, 0.0))]
    times = []
    for _ in range(2):
        started = time.perf_counter()
        report = review_page(
            result.pairs, dict(result.summary), [], division, retrieval, folder / "pictures", folder / "timed"
        )
        (folder / "timed" / "report.html").write_text(report.page, encoding="utf-8")
        (folder / "timed" / "pairs.js").write_text(report.data, encoding="utf-8")
        times.append(time.perf_counter() - started)
    return times[0], times[1]


def _baseline(result, new: Path, page: Path, revision: str) -> float:
    """Write the report of ``revision`` on the top 100 rows of ``result``'s table, thumbnails
    inlined; return the seconds its rows and page took (the thumbnails' encoding included)."""
    source = _git_show(revision, "src/mispair/audit/report.py")
    template = _git_show(revision, "src/mispair/audit/report.html.j2")
    module = types.ModuleType("baseline_report")
    sys.modules[module.__name__] = module  # its dataclass looks the module up
    exec(compile(source, "baseline_report.py", "exec"), module.__dict__)  # the old renderer, as it was
    module.resources = types.SimpleNamespace(files=lambda _: _Template(template))
    division = score_division(result.pairs["held_out_score"].to_numpy())
    retrieval = [("this run", dict.fromkeys(METRIC_KEYS, 0.0))]
    started = time.perf_counter()
    wanted = set(result.pairs.head(100)[["image_id", "suggested_image_id_1"]].stack())
    data = _page_images(new, new.parent / "pictures", wanted)
    rows = []
    for row in result.pairs.head(100).to_dict("records"):
        rows.append(
            {
                **row,
                "suggested_caption": row["suggested_caption_1"],
                "suggested_caption_score": row["suggested_caption_score_1"],
                "suggested_image_id": row["suggested_image_id_1"],
                "suggested_image_score": row["suggested_image_score_1"],
                "thumbnail": data.get(row["image_id"], ""),
                "suggested_thumbnail": data.get(row["suggested_image_id_1"], ""),
                "suggested_caption_is_own": row["suggested_caption_1"] == row["caption"],
                "suggested_image_is_own": row["suggested_image_id_1"] == row["image_id"],
            }
        )
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(module.render_report(result.summary, rows, [], division, retrieval), encoding="utf-8")
    return time.perf_counter() - started


class _Template:
    def __init__(self, text: str):
        self.text = text

    def joinpath(self, _name: str) -> _Template:
        return self

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.text


def _git_show(revision: str, path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{revision}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def _page_images(folder: Path, pictures: Path, wanted: set[str]) -> dict[str, str]:
    """Image id → its thumbnail in ``folder/thumbs`` as a base64 ``data:`` URI (what the old
    report inlined), for the ``wanted`` images of ``pictures``."""
    inline = "data:image/jpeg;base64,"
    return {
        image_id: inline
        + base64.b64encode((folder / THUMBS / thumbnail_name(pictures / image_id, 96)).read_bytes()).decode(
            "ascii"
        )
        for image_id in wanted
    }


def _browse(page: Path, query: str, repeats: int, *, last: bool) -> dict[str, float]:
    """Median seconds over ``repeats`` fresh pages: first render, reaching the last page, a search."""
    from playwright.sync_api import sync_playwright

    times: dict[str, list[float]] = {"first render": [], "last page": [], "search": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        for _ in range(repeats):
            tab = browser.new_page(viewport={"width": 1400, "height": 1000})
            started = time.perf_counter()
            tab.goto(page.as_uri(), wait_until="commit")
            tab.wait_for_selector("body[data-ready='1']", timeout=120_000)
            times["first render"].append(time.perf_counter() - started)
            if last:
                pages = tab.text_content("#page-of").split()[-1]
                started = time.perf_counter()
                tab.click("#last")
                tab.wait_for_selector(f"body[data-page='{pages}']")
                times["last page"].append(time.perf_counter() - started)
                started = time.perf_counter()
                tab.fill("#search", query)
                tab.wait_for_function("() => document.body.getAttribute('data-page') === '1'")  # a function:
                # the page's content security policy forbids evaluating a string
                times["search"].append(time.perf_counter() - started)
            else:
                started = time.perf_counter()
                tab.fill("#filter", query)
                times["search"].append(time.perf_counter() - started)
            tab.close()
        browser.close()
    return {k: statistics.median(v) for k, v in times.items() if v}


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _table(args, new, old, result, first, again, old_seconds, new_times, old_times) -> list[str]:
    pairs = len(result.pairs)
    html = (new / "report.html").stat().st_size
    data = (new / "pairs.js").stat().st_size
    thumbs = _size(new / "thumbs")
    folder = html + data + thumbs
    old_html = old.stat().st_size

    def seconds(times: dict[str, float], key: str) -> str:
        return f"{times[key]:.2f} s" if key in times else "-"

    rows = [
        ("pairs in the report", f"{pairs:,} (every pair)", "100 (the top suspects)"),
        (
            "report.html",
            f"{html / 1e6:.2f} MB = {html / pairs:.2f} B/pair",
            f"{old_html / 1e6:.2f} MB = {old_html / 100:.0f} B/shown pair",
        ),
        ("pairs.js", f"{data / 1e6:.2f} MB = {data / pairs:.0f} B/pair", "-"),
        (
            "thumbs/",
            f"{thumbs / 1e6:.2f} MB ({len(list((new / 'thumbs').iterdir())):,} files) = "
            f"{thumbs / pairs:.0f} B/pair",
            "inlined in report.html",
        ),
        (
            "report folder (html + pairs.js + thumbs)",
            f"{folder / 1e6:.2f} MB = {folder / pairs:.0f} B/pair",
            f"{old_html / 1e6:.2f} MB",
        ),
        ("write the report, every thumbnail written", f"{first:.2f} s", f"{old_seconds:.2f} s (top 100)"),
        ("write the report again, thumbnails reused", f"{again:.2f} s", "-"),
        ("Chromium: first render", seconds(new_times, "first render"), seconds(old_times, "first render")),
        ("Chromium: reach the last page", seconds(new_times, "last page"), "- (only the top 100 shown)"),
        ("Chromium: text search over the pairs", seconds(new_times, "search"), seconds(old_times, "search")),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [
        f"Report of a synthetic audit: {pairs:,} pairs, {args.images:,} images; median of "
        f"{args.repeats} fresh pages in headless Chromium (Debian's, via playwright)",
        f"{'':{width}}  {'this report':38}  report of {args.baseline} (top 100)",
    ]
    lines += [f"{name:{width}}  {a:38}  {b}" for name, a, b in rows]
    lines.append(
        f"budget: report.html <= 1,500 B/pair: {html / pairs:.0f}; report folder <= 8,000 B/pair: "
        f"{folder / pairs:.0f}"
    )
    return lines


if __name__ == "__main__":
    main()

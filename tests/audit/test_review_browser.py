"""The review page driven in headless Chromium through Playwright (the system's ``chromium``;
nothing is downloaded): every pair is reachable by paging, decisions made by click and by key
survive a reload, the bulk drop takes exactly the undecided pairs at or above its probability,
the filters show what they say, ``decisions-<audit_id>.csv`` holds exactly the decisions made,
and no request leaves the audit's folder."""

import csv
import shutil

import numpy as np
import pytest

from mispair.audit.synthetic import synthetic_audit
from mispair.cli import main

playwright = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install playwright)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (scripts/install.sh)")
PAIRS, PAGE = 120, 50


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    folder = tmp_path_factory.mktemp("synthetic")
    result = synthetic_audit(folder, pairs=PAIRS, images=40, seed=3)
    return folder / "audit", result


@pytest.fixture
def browser_page(audit, tmp_path):
    """A page on the report and the list of every URL it requested."""
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(accept_downloads=True, viewport={"width": 1300, "height": 900})
        requests = []
        context.on("request", lambda request: requests.append(request.url))
        context.route("http*://**/*", lambda route: route.abort())
        page = context.new_page()
        page.goto((audit[0] / "report.html").as_uri())
        page.wait_for_selector("body[data-ready='1']")
        yield page, requests
        browser.close()


def _shown_ids(page):
    return page.eval_on_selector_all("#pairs tbody tr", "rows => rows.map(r => r.dataset.pairId)")


def _states(page):
    return page.eval_on_selector_all("#pairs tbody tr .state", "cells => cells.map(c => c.textContent)")


def test_review_by_click_and_key_survives_a_reload_downloads_and_applies(audit, browser_page, tmp_path):
    out, result = audit
    page, requests = browser_page
    table = result.pairs
    ids = table["pair_id"].tolist()
    assert _shown_ids(page) == ids[:PAGE]
    assert page.text_content("#page-of") == "page 1 of 3"

    page.click("#last")  # the last page holds the least suspect pairs
    assert page.get_attribute("body", "data-page") == "3"
    assert _shown_ids(page) == ids[2 * PAGE :]
    last = page.locator("#pairs tbody tr").last
    last.locator("button.act-drop").click()  # by click: drop the least suspect pair
    expected = {ids[-1]: ("drop", "")}
    row = page.locator("#pairs tbody tr").nth(3)
    suggestion = table["suggested_caption_2"].iloc[2 * PAGE + 3]
    row.locator("button.suggestion").nth(1).click()  # by click: its second suggested caption
    expected[ids[2 * PAGE + 3]] = (
        ("keep", "") if suggestion == table["caption"].iloc[2 * PAGE + 3] else ("replace", suggestion)
    )

    page.click("#first")
    page.keyboard.press("a")  # keep; the cursor moves on
    page.keyboard.press("x")  # drop
    page.keyboard.press("1")  # the first suggestion
    first = table["suggested_caption_1"].iloc[2]
    page.keyboard.press("e")
    page.keyboard.type('a caption, with "quotes" typed by hand')
    page.keyboard.press("Enter")
    page.keyboard.press("a")
    page.keyboard.press("u")  # undo the last keep
    page.keyboard.press("j")  # skip one
    page.keyboard.press("x")
    typed = ("replace", 'a caption, with "quotes" typed by hand')
    expected |= {
        ids[0]: ("keep", ""),
        ids[1]: ("drop", ""),
        ids[2]: ("keep", "") if first == table["caption"].iloc[2] else ("replace", first),
        ids[3]: typed,
        ids[6]: ("drop", ""),
    }
    assert _states(page)[4] == "undecided" and _states(page)[5] == "undecided"

    page.fill("#bulk-p", "0.9")
    shown = page.evaluate("window.mispairAudit.rows.map(function (r) { return r[3]; })")
    at = [p for p in shown if p >= 0.9]
    below = [p for p in shown if p < 0.9]
    false_drops, kept = 1 - sum(at) / len(at), sum(below) / len(below)
    estimate = page.text_content("#bulk-estimate")  # live, as the cut moves, and marked unchecked
    assert estimate.startswith("Not checked (the scores' estimate")
    assert f"At ≥ 0.90: {len(at)} pairs, of which an estimated {100 * false_drops:.1f}%" in estimate
    assert f"an estimated {100 * kept:.1f}% of the pairs below the cut are mismatched" in estimate
    messages = []

    def answer(dialog, accept):
        messages.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, False))  # asked first: nothing dropped
    page.click("#bulk-drop")
    assert page.text_content("#bulk-note") == "nothing dropped" and _states(page)[4] == "undecided"
    page.once("dialog", lambda dialog: answer(dialog, True))
    page.click("#bulk-drop")
    probability = dict(zip(ids, table["mismatch_probability"]))
    bulk = {i: ("drop", "") for i in ids if probability[i] >= 0.9 and i not in expected}
    assert bulk  # the synthetic scores put some pairs above 0.9
    good = round(len(bulk) * false_drops)
    asked = (
        f"Drop {len(bulk)} undecided pairs? An estimated {100 * false_drops:.1f}% of the pairs at this "
        f"cut are correct: about {good} good pairs would be dropped (the scores' estimate, not checked "
        "by a sample)."
    )
    assert messages == [asked, asked]
    expected |= bulk

    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    states = _states(page)
    assert states[0] == "keep" and states[1] == "drop" and states[3].startswith("replace by: a caption")
    page.select_option("#decision-filter", "drop")
    assert set(_shown_ids(page)) == {i for i, (d, _) in expected.items() if d == "drop"}
    page.select_option("#decision-filter", "all")
    page.fill("#p-min", "0.2")
    page.fill("#p-max", "0.6")
    assert _shown_ids(page) == [i for i in ids if 0.2 <= round(probability[i], 3) <= 0.6][:PAGE]
    page.fill("#p-min", "0")
    page.fill("#p-max", "1")
    caption = table["caption"].iloc[7]
    page.fill("#search", caption)
    found = table["caption"].str.lower().str.contains(caption.lower(), regex=False)
    shown = f"{found.sum()} of {PAIRS} pairs shown"  # the search runs once typing pauses
    page.wait_for_function("text => document.getElementById('shown').textContent === text", arg=shown)
    assert _shown_ids(page) == table.loc[found, "pair_id"].tolist()[:PAGE]

    with page.expect_download() as download:
        page.click("#download")
    assert download.value.suggested_filename == f"decisions-{result.summary['audit_id']}.csv"
    saved = download.value.path()
    with open(saved, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["pair_id", "decision", "caption", "audit_id"]  # bound to its audit
        rows = list(reader)
        got = [(r["pair_id"], r["decision"], r["caption"]) for r in rows]
    assert {r["audit_id"] for r in rows} == {result.summary["audit_id"]}
    assert {i: (d, c) for i, d, c in got} == expected
    assert [i for i, _, _ in got] == [i for i in ids if i in expected]  # in rank order, once each

    folder = out.resolve().as_uri()
    assert requests and all(url.startswith((folder + "/", "data:", "blob:")) for url in requests), requests

    # the downloaded decisions, applied: the cleaned collection holds exactly the kept and replaced pairs
    clean = tmp_path / "clean"
    assert main(["apply", str(out), "--decisions", str(saved), "--out", str(clean)]) in (0, None)
    with open(clean / "captions.csv", newline="", encoding="utf-8") as f:
        written = {r["pair_id"]: (r["image"], r["caption"]) for r in csv.DictReader(f)}
    image_of = dict(zip(ids, table["image_id"]))
    caption_of = dict(zip(ids, table["caption"]))
    dropped = {i for i, (d, _) in expected.items() if d == "drop"}
    replaced = {i: c for i, (d, c) in expected.items() if d == "replace"}
    assert written == {i: (image_of[i], replaced.get(i, caption_of[i])) for i in ids if i not in dropped}
    assert all((clean / image).is_file() for image, _ in written.values())


def test_a_page_without_its_data_says_so(audit, tmp_path):
    out, _ = audit
    alone = tmp_path / "report.html"
    shutil.copy(out / "report.html", alone)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(alone.as_uri())
        page.wait_for_selector("body[data-ready='0']")
        assert page.is_visible("#data-missing")
        browser.close()


def test_a_click_on_the_map_opens_the_pair_of_the_point(audit, browser_page):
    _, result = audit
    page, _ = browser_page
    table, (width, height) = result.pairs, (960, 420)  # the canvas's drawing size

    def drawn(x, y):
        return np.c_[8 + x * (width - 16), 8 + (1 - y) * (height - 16)]

    captions = drawn(table["map_caption_x"].to_numpy(), table["map_caption_y"].to_numpy())
    images = drawn(table["map_image_x"].to_numpy(), table["map_image_y"].to_numpy())
    every = np.concatenate([captions, images])
    distance = np.linalg.norm(captions[:, None] - every[None], axis=-1)
    distance[np.arange(len(captions)), np.arange(len(captions))] = np.inf
    spread = distance.min(axis=1)
    spread[:PAGE] = -np.inf  # a pair off the first page, where the cursor already is
    lonely = int(spread.argmax())  # the caption whose point is farthest from any other
    box = page.locator("#map").bounding_box()
    x, y = captions[lonely]
    page.locator("#map").click(position={"x": x * box["width"] / width, "y": y * box["height"] / height})
    assert page.get_attribute("#pairs tbody tr.current", "data-pair-id") == table["pair_id"].iloc[lonely]
    assert page.get_attribute("body", "data-page") == str(lonely // PAGE + 1)

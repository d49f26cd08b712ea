"""The review page's "check a sample", driven in headless Chromium (the system's ``chromium``):
30 pairs answered by keyboard in the random order of ``sample.csv``, the audit's probability
shown only after each answer; the page's estimate equals ``mispair estimate``'s on the
downloaded labels to 1e-9 (and ``sample_share``'s after the first answers, some strata still
unanswered, and after every number of answers up to the whole collection: the planned look and
the exact share included); answers survive a reload, the last one can be taken back, and the
answers count as decisions (mismatched → drop, correct → keep) in the decisions file."""

import csv
import json
import shutil

import numpy as np
import pytest

from mispair.audit.page_data import sample_design
from mispair.audit.result import AuditResult
from mispair.audit.synthetic import synthetic_audit
from mispair.cli import main
from mispair.estimate.share import PLANNED_FOR, Z_LOOK, predicted_half_width, sample_share

playwright = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install playwright)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (scripts/install.sh)")
KEYS = "mccmcsccmccmcccmcmccsccmcmcccm"  # 30 answers: m mismatched, c correct, s not sure
LABEL = {"m": "mismatched", "c": "correct", "s": "unsure"}
EARLY = 5  # answers after which the page's estimate is checked while some strata have none
VALUE = {"m": 1.0, "c": 0.0, "s": np.nan}


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    folder = tmp_path_factory.mktemp("synthetic")
    result = synthetic_audit(folder, pairs=150, images=50, seed=5, top=40)  # the sample reaches past the top
    return folder / "audit", result


def test_thirty_answers_by_key_give_the_estimate_of_mispair_estimate(audit, tmp_path, capsys):
    out, result = audit
    order = result.sample["pair_id"].tolist()
    assert sorted(order) == sorted(result.pairs["pair_id"]) and len(set(order)) == len(order)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(accept_downloads=True, viewport={"width": 1300, "height": 900})
        context.route("http*://**/*", lambda route: route.abort())
        page = context.new_page()
        page.goto((out / "report.html").as_uri())
        page.wait_for_selector("body[data-ready='1']")
        page.click("#sample-start")
        assert page.get_attribute("body", "data-mode") == "sample"
        for k, key in enumerate(KEYS):
            assert page.get_attribute("#sample-pair", "data-pair-id") == order[k]  # the sample's order
            assert "mismatch probability" not in page.text_content("#sample-pair")  # hidden until answered
            page.keyboard.press(key)
            shown = f"{result.pairs.set_index('pair_id').loc[order[k], 'mismatch_probability']:.2f}"
            assert page.text_content("#sample-reveal").endswith(f"probability of {shown}.")
            if k + 1 == EARLY:
                early = page.evaluate("window.mispairSample.estimate()")
        page.keyboard.press("m")
        page.keyboard.press("b")  # taken back: 30 answers
        page.reload()
        page.wait_for_selector("body[data-ready='1']")
        page.click("#sample-start")
        estimate = page.evaluate("window.mispairSample.estimate()")
        assert (
            estimate["answers"] == len(KEYS)
            and page.get_attribute("#sample-pair", "data-pair-id") == order[30]
        )
        with page.expect_download() as labels_download:
            page.click("#sample-download")
        labels = tmp_path / labels_download.value.suggested_filename
        labels_download.value.save_as(labels)
        page.keyboard.press("Escape")
        with page.expect_download() as decisions_download:
            page.click("#download")
        decisions = tmp_path / "decisions.csv"
        decisions_download.value.save_as(decisions)
        browser.close()

    assert labels.name == f"labels-{result.summary['audit_id']}.csv"
    with open(labels, newline="", encoding="utf-8") as f:
        written = [(r["pair_id"], r["label"]) for r in csv.DictReader(f)]
    assert written == [(order[k], LABEL[key]) for k, key in enumerate(KEYS)]

    python = AuditResult.load(out).estimate(labels)
    share = python.share
    assert estimate["share"] == pytest.approx(share.estimate.share, abs=1e-9)
    assert estimate["low"] == pytest.approx(share.estimate.low, abs=1e-9)
    assert estimate["high"] == pytest.approx(share.estimate.high, abs=1e-9)
    assert estimate["labels_only"] == pytest.approx([share.labels_only.low, share.labels_only.high], abs=1e-9)
    assert estimate["answers_for_target"] == share.answers_for_target
    assert (estimate["mismatched"], estimate["correct"], estimate["unsure"]) == (
        KEYS.count("m"),
        KEYS.count("c"),
        KEYS.count("s"),
    )
    f, strata = _order(out)
    assert set(strata[:EARLY]) < set(strata)  # a stratum without an answer adds its weight on top
    _assert_same(early, sample_share(np.array([VALUE[key] for key in KEYS[:EARLY]]), f, strata))
    assert main(["estimate", str(out), "--labels", str(labels), "--json"]) in (0, None)
    printed = json.loads(capsys.readouterr().out)
    assert printed["mismatched_share"] == pytest.approx(estimate["share"], abs=1e-9)
    assert printed["mismatched_share_interval"] == pytest.approx(
        [estimate["low"], estimate["high"]], abs=1e-9
    )
    assert json.loads((out / "estimate.json").read_text()) == printed

    with open(decisions, newline="", encoding="utf-8") as f:
        made = {r["pair_id"]: r["decision"] for r in csv.DictReader(f)}
    judged = {order[k]: {"m": "drop", "c": "keep"}[key] for k, key in enumerate(KEYS) if key != "s"}
    assert made == judged  # the 31st answer, taken back, took its decision back too


def test_every_number_of_answers_gives_the_estimate_of_sample_share(audit):
    """From no answer to every pair of the collection: strata without answers, the planned look
    (from which the interval is intersected with the look's) and the exact share at the end."""
    out, result = audit
    f, strata = _order(out)
    design = sample_design(AuditResult.load(out).pairs, result.sample)
    assert design["look"] < len(f)  # the look is inside the page's rows, predicted within ± 3 points
    assert predicted_half_width(design["look"], f, strata, Z_LOOK) <= PLANNED_FOR
    rng = np.random.default_rng(3)
    keys = rng.choice(list("mcs"), size=len(f), p=[0.3, 0.65, 0.05])
    labels = [[pair_id, LABEL[key]] for pair_id, key in zip(result.sample["pair_id"], keys)]
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.route("http*://**/*", lambda route: route.abort())
        page.goto((out / "report.html").as_uri())
        page.wait_for_selector("body[data-ready='1']")
        every = (
            "(all) => [...Array(all.length + 1).keys()]"
            ".map((n) => window.mispairSample.estimate(all.slice(0, n)))"
        )
        estimates = page.evaluate(every, labels)
        browser.close()
    values = np.array([VALUE[key] for key in keys])
    for n, estimate in enumerate(estimates):
        _assert_same(estimate, sample_share(values[:n], f, strata))


def _order(out):
    """Every pair's mismatch probability and stratum in the saved audit's sample order."""
    saved = AuditResult.load(out)
    ids = saved.sample["pair_id"].tolist()
    f = saved.pairs.set_index("pair_id").loc[ids, "mismatch_probability"].astype("float64").to_numpy()
    return f, saved.sample["stratum"].to_numpy(dtype=object)


def _assert_same(estimate, share):
    """The page's estimate is ``share`` (a :class:`~mispair.estimate.share.SampleShare`) to 1e-9."""
    e = share.estimate
    interval = [estimate["share"], estimate["low"], estimate["high"]]
    assert interval == pytest.approx([e.share, e.low, e.high], abs=1e-9)
    assert estimate["labels_only"] == pytest.approx([share.labels_only.low, share.labels_only.high], abs=1e-9)
    assert estimate["answers"] == share.answers and estimate["answers_for_target"] == share.answers_for_target
    if share.answers:
        assert estimate["std"] == pytest.approx(e.std, abs=1e-9)


def test_a_long_caption_without_spaces_wraps_in_both_views(tmp_path, monkeypatch):
    """Issue 64.8: a 1,000-character caption with no space made the sample view 18,000 px wide."""
    from mispair.audit import synthetic

    monkeypatch.setattr(synthetic, "_caption", lambda name, rng: "W" * 1000)
    synthetic_audit(tmp_path, pairs=30, images=10, seed=1)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 800, "height": 900})
        page.route("http*://**/*", lambda route: route.abort())
        page.goto((tmp_path / "audit" / "report.html").as_uri())
        page.wait_for_selector("body[data-ready='1']")
        widths = {"review": page.evaluate("document.documentElement.scrollWidth")}
        page.click("#sample-start")
        assert page.text_content("#sample-pair").endswith("W" * 1000)  # the whole caption, wrapped
        widths["sample"] = page.evaluate("document.documentElement.scrollWidth")
        browser.close()
    assert widths == {"review": 800, "sample": 800}

"""The review page's cards of join errors in a real browser (headless Chromium; issue 65 item 3):
an audit whose collection carries a shifted run of captions (the run planted in the audit's
findings, as the scores of a tiny model would not find it) and a caption pasted on 12 pictures.
The run's card shows its first and last rows with the caption each carries and the one the repair
gives it, which is the picture's own; every caption is text, never markup. One decision per card
(by click, by keyboard, undone with ``u``) becomes the pairs' decisions; downloaded and applied
with ``mispair apply --decisions``, the page's "repair" writes the collection ``mispair apply
--repair`` does."""

import shutil

import pandas as pd
import pytest

from mispair.audit import audit_collection
from mispair.audit import run as audit_run
from mispair.audit.join_findings import Shift
from mispair.cli import main
from mispair.data.synthetic import write_synthetic_dataset

from .test_apply import TINY, write_feature_folder

playwright = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install playwright)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (scripts/install.sh)")

FIRST, LAST, SHIFTED = 100, 149, 159
"""Rows 100-159 carry the next row's caption (a caption cell deleted at row 100, the rows below
moved up; the rows of the next picture down carry the row after theirs); the run reported is rows
100-149 (its edge missed, as the audit often does), so row 150 gets its own caption back too."""
PASTED = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"> pasted & kept"
HOSTILE = {
    102: "<script>document.body.setAttribute('data-pwned','2')</script> & \"a, b\"",
    120: '=HYPERLINK("http://x","y")',  # a formula: the download makes it safe, apply reads it back
}


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    """The audited collection, the audit's folder and the collection's true captions."""
    base = tmp_path_factory.mktemp("findings")
    precomp = write_synthetic_dataset(base / "precomp", n_train=60, n_dev=20, n_test=20)
    folder = write_feature_folder(base / "collection", precomp)
    rows = pd.read_csv(folder / "captions.csv", dtype=str, keep_default_na=False)
    for k, caption in HOSTILE.items():
        rows.loc[k, "caption"] = caption
    pasted = rows[rows["split"] == "train"].drop_duplicates("image").index[:12]  # rows 0, 5, ..., 55
    rows.loc[pasted, "caption"] = PASTED
    truth = rows["caption"].copy()
    rows.loc[FIRST:SHIFTED, "caption"] = truth.loc[FIRST + 1 : SHIFTED + 1].to_numpy()
    rows.to_csv(folder / "captions.csv", index=False)
    real = audit_run.join_findings

    def planted(*args):
        found = real(*args)
        ids = [str(k) for k in range(FIRST, LAST + 1)]
        moves = [(str(k), str(k + 1)) for k in range(FIRST, LAST + 1)]
        evidence = (40, 45, 0.05, 1e-12, 0)  # agreeing, informative, gain, p-value, suspected
        found.shifts = [Shift("captions.csv", "100", "149", 1, 50, *evidence, ids, moves, ["100"])]
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(audit_run, "join_findings", planted)
        audit_collection(folder, base / "audit", overrides=TINY, progress=False, log=lambda _: None)
    return folder, base / "audit", truth, rows


def _open(browser, out):
    context = browser.new_context(accept_downloads=True, viewport={"width": 1300, "height": 900})
    context.route("http*://**/*", lambda route: route.abort())
    page = context.new_page()
    page.goto((out / "report.html").as_uri())
    page.wait_for_selector("body[data-ready='1']")
    return page


def _decisions(page):
    key = "mispair-decisions-" + page.get_attribute("#review", "data-audit-id")
    return page.evaluate(f"JSON.parse(localStorage.getItem('{key}') || '{{}}')")


def test_a_runs_card_shows_the_repair_and_its_decision_applies_as_repair_does(audit, tmp_path):
    _, out, truth, planted = audit
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = _open(browser, out)
        assert page.is_hidden("#join-errors") and page.is_visible("#join-cards")
        kinds = page.eval_on_selector_all("#join-cards .finding", "cards => cards.map(c => c.dataset.kind)")
        assert kinds == ["shift", "pasted"]
        run, pasted = "#join-cards .finding[data-kind='shift']", "#join-cards .finding[data-kind='pasted']"
        shown = page.eval_on_selector_all(
            run + " tr[data-pair-id]",
            "rows => rows.map(r => [r.dataset.pairId, r.cells[1].textContent, r.cells[2].textContent])",
        )
        gap = page.text_content(run + " tr.gap")
        words = page.text_content(run + " .finding-words")
        on_pasted = page.eval_on_selector_all(
            pasted + " tr[data-pair-id]", "rows => rows.map(r => r.cells[1].textContent)"
        )

        page.click(run + " button[data-choice='drop']")
        dropped = _decisions(page)
        page.focus(run + " button[data-choice='repair']")
        page.keyboard.press("Enter")  # by keyboard: the button's own
        repaired = (_decisions(page), page.get_attribute(run, "data-decision"))
        page.click(run + " button[data-choice='keep']")
        kept = (_decisions(page), page.text_content(run + " .finding-state"))
        page.keyboard.press("u")  # undo: the repair again
        undone = page.get_attribute(run, "data-decision")
        page.click(pasted + " button[data-choice='drop']")
        decided = (page.get_attribute(pasted, "data-decision"), page.get_attribute(run, "data-decision"))
        counted = page.text_content("#counts")
        page.reload()
        page.wait_for_selector("body[data-ready='1']")
        stored = page.get_attribute(run, "data-decision")  # read back from the stored decisions
        pwned = page.get_attribute("body", "data-pwned")
        with page.expect_download() as download:
            page.click("#download")
        decisions = tmp_path / download.value.suggested_filename
        download.value.save_as(decisions)
        browser.close()

    now = planted["caption"]
    lost = "its own caption is lost (none moves onto it): repair drops it"
    assert shown == [
        ["100", now[100], lost],
        ["101", now[101], truth[101]],  # the caption found a row above: the picture's own
        ["102", now[102], truth[102]],
        ["148", now[148], truth[148]],
        ["149", now[149], truth[149]],
    ]
    assert truth[102] == HOSTILE[102] and now[101] == HOSTILE[102] and pwned is None  # text, never markup
    assert gap == "… 45 more rows of the run …"
    assert words.startswith("pairs 100–149 of captions.csv carry the next row's caption (50 rows")
    assert on_pasted == [PASTED] * 5
    run_ids = [str(k) for k in range(FIRST, LAST + 1)]
    assert dropped == {i: {"d": "drop", "c": ""} for i in run_ids}
    expected = {"100": {"d": "drop", "c": ""}}
    expected |= {str(k): {"d": "replace", "c": truth[k]} for k in range(FIRST + 1, LAST + 2)}
    assert repaired == (expected, "repair")  # row 150, past the run, gets its caption back too
    assert kept == ({i: {"d": "keep", "c": ""} for i in run_ids}, "decided: keep as is")  # 150's taken back
    assert undone == "repair" and decided == ("drop", "repair") and stored == "repair"
    assert counted == f"0 kept, 13 dropped, 50 replaced, {len(planted) - 63} undecided"  # 1 + 12 dropped

    page_out, repair_out = tmp_path / "page", tmp_path / "repair"
    assert main(["apply", str(out), "--decisions", str(decisions), "--out", str(page_out)]) in {0, None}
    assert main(["apply", str(out), "--repair", "--out", str(repair_out)]) in {0, None}
    by_page = pd.read_csv(page_out / "captions.csv", dtype=str, keep_default_na=False)
    by_repair = pd.read_csv(repair_out / "captions.csv", dtype=str, keep_default_na=False)
    not_pasted = by_repair[by_repair["caption"] != PASTED].reset_index(drop=True)  # dropped on the page only
    assert by_page.to_dict("records") == not_pasted.to_dict("records")
    right = planted.assign(caption=planted["caption"].where(~planted.index.isin(range(101, 151)), truth))
    right = right.drop(index=[100, *planted.index[planted["caption"] == PASTED]]).reset_index(drop=True)
    assert by_page.to_dict("records") == right.to_dict("records")  # 101-150 right; 151-159 missed

"""The review page routes a person through the proof of the drop (issue 63, item 4), driven in
headless Chromium (the system's ``chromium``): answers by keyboard go first to the audit's
suspects (the ``cut`` stratum), the bulk drop's figure is marked "not checked" until the answers
prove a cut and the proven figure then replaces it, equal to ``mispair estimate --fdr``'s drop to
1e-9 (its cut, the pairs dropped, the interval of its error, the kept set's share, the answers a
proof still needs), as is the blind-spot warning of the command line, in its words; the picture is
shown at its own size and its file name only when asked; the stored answers are tied to the
sample's order (issue 64: a re-audit with another seed keeps the id, not the answers)."""

import csv
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from mispair.audit.page_data import order_digest, page_data, sample_design, sample_rows
from mispair.audit.result import AuditResult
from mispair.audit.synthetic import synthetic_audit
from mispair.cli import main
from mispair.estimate.sample import audit_sample

playwright = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install playwright)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (scripts/install.sh)")
LABEL = {"m": "mismatched", "c": "correct", "s": "unsure"}
FDR = 0.1  # the page's rate: the synthetic audit's summary records none
EXACT = ("fdr", "proven", "suspected", "cut", "cut_stratum", "answered_in_cut", "unjudged_dropped", "kept")
CLOSE = (
    "fdr_estimate",
    "fdr_proven_at_most",
    "fdr_interval",
    "kept_mismatched_share",
    "kept_mismatched_share_interval",
)


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    """400 pairs, 46 of them suspected: a cut a few dozen answers prove."""
    folder = tmp_path_factory.mktemp("cut")
    result = synthetic_audit(folder, pairs=400, images=50, seed=3, top=40)
    return folder / "audit", result


def _open(browser, out, **options):
    context = browser.new_context(accept_downloads=True, viewport={"width": 1300, "height": 900}, **options)
    context.route("http*://**/*", lambda route: route.abort())
    page = context.new_page()
    page.goto((out / "report.html").as_uri())
    page.wait_for_selector("body[data-ready='1']")
    return context, page


def _assert_same_drop(page_drop, python_drop):
    """The page's drop is ``estimate.json``'s (``LabelledDrop.to_dict``) to 1e-9."""
    assert {k: page_drop[k] for k in EXACT} == {k: python_drop[k] for k in EXACT}
    assert page_drop["tests"] == python_drop["tests"]
    assert page_drop["more_answers_to_prove"] == python_drop["more_answers_to_prove"]
    for key in CLOSE:
        assert page_drop[key] == pytest.approx(python_drop[key], abs=1e-9), key


def test_answers_inside_the_cut_replace_the_unchecked_figure_by_the_proven_one(audit, tmp_path, capsys):
    out, result = audit
    order, strata = result.sample["pair_id"].tolist(), result.sample["stratum"].tolist()
    keys = ["m" if s == "cut" else "c" for s in strata]
    keys[strata.index("cut")] = "c"  # one correct pair among the suspects: the bound is not 0
    assert strata[:3].count("cut") >= 2  # the first answers go to the suspects
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        _context, page = _open(browser, out)
        assert page.evaluate("window.mispairAudit.sample.fdr") == FDR
        assert page.get_attribute("#bulk-estimate", "data-checked") == "0"
        assert page.text_content("#bulk-estimate").startswith("Not checked")
        assert page.text_content("#suspects-check") == "not checked by a sample yet"
        page.click("#sample-start")
        assert "the first answers check the 46 suspects" in page.text_content("#sample-check h2")
        picture = page.query_selector("#sample-pair img")
        sizes = picture.evaluate(
            "(img) => [img.naturalWidth, img.clientWidth, img.naturalHeight, img.clientHeight]"
        )
        assert sizes[0] == sizes[1] and sizes[2] == sizes[3]  # its own size: no upscaling blur
        name = result.pairs.set_index("pair_id").loc[order[0], "image_id"]
        assert name not in page.text_content("#sample-pair")  # the file's name could give the answer away
        page.click("#sample-pair .sample-name")
        assert name in page.text_content("#sample-pair")  # ... shown when asked
        before, n = None, 0
        for key in keys:
            page.keyboard.press(key)
            n += 1
            if page.get_attribute("#sample-drop", "data-proven") == "1":
                break
            before = page.text_content("#sample-drop")
        proven = page.evaluate("window.mispairSample.drop()")
        shown = page.text_content("#sample-drop")
        dropped = page.evaluate("window.mispairSample.dropped()")
        page.keyboard.press("Escape")
        review = page.text_content("#bulk-estimate")
        checked = page.get_attribute("#bulk-estimate", "data-checked")
        card = page.text_content("#suspects-check")
        messages = []
        page.once("dialog", lambda dialog: (messages.append(dialog.message), dialog.accept()))
        page.click("#bulk-drop")  # at the audit's own cut: the proven drop's undecided pairs
        with page.expect_download() as labels_download:
            page.evaluate("document.getElementById('sample-download').click()")
        labels = tmp_path / labels_download.value.suggested_filename
        labels_download.value.save_as(labels)
        with page.expect_download() as decisions_download:
            page.click("#download")
        decisions = tmp_path / "decisions.csv"
        decisions_download.value.save_as(decisions)
        browser.close()

    assert n < len(keys) and proven["proven"] and proven["unjudged_dropped"] > 0
    assert before.startswith("Dropping the 46 suspects, not proven yet") and "more answer" in before
    high = f"{proven['fdr_proven_at_most']:.1%}"
    low_end, high_end = (f"{v:.1%}" for v in proven["fdr_interval"])
    assert shown.startswith("Checked by your answers: at a false-discovery rate of 0.1, ")
    assert f"{proven['suspected']} pairs can be dropped: at most {high} of them correct" in shown
    unjudged = proven["unjudged_dropped"]
    assert f"90% confidence; 95% interval {low_end}–{high_end}, {unjudged} of them unjudged" in shown
    kept = proven["kept_mismatched_share_interval"]
    assert f"{proven['kept_mismatched_share']:.1%} ({kept[0]:.1%}–{kept[1]:.1%}) are mismatched" in shown
    assert checked == "1" and review == shown  # the proven figure in the review's bulk drop too
    assert card == f"checked: {proven['suspected']} can be dropped, at most {high} correct"

    assert main(["estimate", str(out), "--labels", str(labels), "--fdr", str(FDR), "--json"]) in (0, None)
    printed = json.loads(capsys.readouterr().out)
    assert printed["labels"] == n
    _assert_same_drop(proven, printed["drop"])
    table = pd.read_csv(out / "estimate_pairs.csv", dtype={"pair_id": str})
    assert set(dropped) == set(table.loc[table["suspected"], "pair_id"]) and len(dropped) == len(set(dropped))

    asked = (
        f"Drop {proven['unjudged_dropped']} undecided pairs? Your answers prove at most {high} of the "
        f"{proven['suspected']} pairs of the proven drop are correct (90% confidence)."
    )
    assert messages == [asked]
    with open(decisions, newline="", encoding="utf-8") as f:
        made = {r["pair_id"]: r["decision"] for r in csv.DictReader(f)}
    assert {i for i, d in made.items() if d == "drop"} == set(dropped)  # answered and bulk-dropped alike


def test_every_number_of_answers_gives_the_drop_and_warning_of_estimate(audit):
    """Honest, noisy and blind-spot answers, after 1 to 90 answers and then every 50: the page's
    drop (proven or not, with the answers a proof needs) and warning are ``estimate``'s."""
    out, result = audit
    saved = AuditResult.load(out)
    ids, strata = result.sample["pair_id"].tolist(), result.sample["stratum"].tolist()
    rng = np.random.default_rng(7)
    patterns = {
        "noisy": [
            rng.choice(list("mcs"), p=[0.9, 0.07, 0.03] if s == "cut" else [0.1, 0.85, 0.05]) for s in strata
        ],
        "blind": ["c" if s == "cut" else ("m" if k % 3 == 0 else "c") for k, s in enumerate(strata)],
        "near": ["m" if s in ("cut", "likely", "edge") or k % 3 == 0 else "c" for k, s in enumerate(strata)],
    }
    counts = [*range(1, 91), *range(100, len(ids) + 1, 50)]
    labelled = {name: [[i, LABEL[str(k)]] for i, k in zip(ids, keys)] for name, keys in patterns.items()}
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        _context, page = _open(browser, out)
        every = (
            "([all, counts]) => counts.map((n) => "
            "[window.mispairSample.drop(all.slice(0, n)), window.mispairSample.blindSpot(all.slice(0, n))])"
        )
        shown = {name: page.evaluate(every, [labels, counts]) for name, labels in labelled.items()}
        browser.close()
    seen = {"proven": 0, "more": 0, "warning": set()}
    for name, labels in labelled.items():
        for n, (drop, warning) in zip(counts, shown[name]):
            python = saved.estimate(pd.DataFrame(labels[:n], columns=["pair_id", "label"]), fdr=FDR)
            _assert_same_drop(drop, python.drop.to_dict())
            assert warning == python.warning, (name, n)
            seen["proven"] += drop["proven"]
            seen["more"] += drop["more_answers_to_prove"] is not None
            seen["warning"] |= {_kind(warning)} if warning else set()
    assert seen["proven"] and seen["more"]  # proofs, and counts of the answers one needs
    assert seen["warning"] == {"blind spot", "not yet told"}


def _kind(warning):
    """Which of blind_spot's three warnings ``warning`` is."""
    if "cannot yet tell" in warning:
        return "not yet told"
    return "cautious cut" if "cautious here" in warning else "blind spot"


def test_the_blind_spot_warning_of_the_command_line_is_in_the_sample_view(audit, tmp_path, capsys):
    out, result = audit
    strata = result.sample["stratum"].tolist()
    keys = ["c" if s == "cut" else ("m" if k % 2 == 0 else "c") for k, s in enumerate(strata[:60])]
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        _context, page = _open(browser, out)
        page.click("#sample-start")
        assert page.is_hidden("#sample-warning")
        for key in keys:
            page.keyboard.press(key)
        warning = page.text_content("#sample-warning")
        visible = page.is_visible("#sample-warning")
        with page.expect_download() as labels_download:
            page.click("#sample-download")
        labels = tmp_path / "labels.csv"
        labels_download.value.save_as(labels)
        browser.close()
    assert main(["estimate", str(out), "--labels", str(labels)]) in (0, None)
    printed = capsys.readouterr().out
    assert visible and f"  {warning}\n" in printed and "scores do not see" in warning, (warning, strata[:40])


def test_stored_answers_are_those_of_the_sample_order(audit, tmp_path):
    """Issue 64: the answers are kept under the audit id and the order's digest; the same audit
    with another sample order (a re-audit with another seed) starts with none, and an answer
    stored under the old key (the audit id alone) is not taken either."""
    out, result = audit
    page_folder = tmp_path / "audit"
    shutil.copytree(out, page_folder)
    saved = AuditResult.load(out)
    audit_id, order = saved.summary.audit_id, result.sample["pair_id"].tolist()
    digest = order_digest(order)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        _context, page = _open(browser, page_folder)
        assert page.evaluate("window.mispairAudit.sample.digest") == digest
        page.evaluate(  # a page of before the digest stored one answer under the id alone
            "([key, value]) => localStorage.setItem(key, value)",
            [f"mispair-labels-{audit_id}", json.dumps([[order[0], "mismatched"]])],
        )
        page.click("#sample-start")
        assert page.text_content("#sample-count") == "0 answered"
        for key in "mcm":
            page.keyboard.press(key)
        stored = page.evaluate(f"localStorage.getItem('mispair-labels-{audit_id}-{digest}')")
        assert json.loads(stored) == [
            [order[0], "mismatched"],
            [order[1], "correct"],
            [order[2], "mismatched"],
        ]

        again = audit_sample(saved.pairs, 4, audit_id)  # the same audit, another seed's order
        assert again["pair_id"].tolist() != order
        script = page_data(
            saved.pairs.head(40),
            {},
            audit=audit_id,
            threshold=saved.summary.threshold,
            rest=saved.pairs.iloc[40:],
            sample=sample_rows(saved.pairs, again),
            design=sample_design(saved.pairs, again),
        )
        (page_folder / "pairs.js").write_text(script, encoding="utf-8")
        page.reload()
        page.wait_for_selector("body[data-ready='1']")
        page.click("#sample-start")
        fresh = [
            page.text_content("#sample-count"),
            page.get_attribute("#sample-pair", "data-pair-id"),
            page.evaluate("window.mispairSample.answers().length"),
        ]
        browser.close()
    assert fresh == ["0 answered", again["pair_id"].iloc[0], 0]

"""The review page's cards of join errors (``pairs.js``'s ``findings``, issue 65 item 3): a run's
first and last rows with the caption each carries and the one ``repair.csv`` gives it (or that its
own caption is lost), the run's decisions for "repair" exactly ``repair.csv``'s rows, a pasted
caption's pairs, the pictures among the page's thumbnails, and at most ``most`` cards."""

import json

import pandas as pd

from mispair.audit.join_findings import JoinFindings, RepeatedCaption, Shift
from mispair.audit.page_data import page_data
from mispair.audit.page_findings import finding_cards
from mispair.audit.repair import repair_frame
from mispair.safe_io import spreadsheet_text


def _pairs(n=20):
    captions = [f"caption {k}" for k in range(n)]
    captions[7] = "=1+1 <b>x</b>"  # a formula and markup: the page carries it raw
    return pd.DataFrame(
        {
            "pair_id": [str(k) for k in range(n)],
            "image_id": [f"p{k}.png" for k in range(n)],
            "caption": captions,
            "mismatch_probability": [0.5] * n,
            "held_out_score": [0.1] * n,
            "split": ["train"] * n,
        }
    )


def _findings():
    """Rows 3-12 carry the next row's caption; pair 4 carries a pasted caption (no caption moves
    onto it, as ``join_findings._named`` leaves such a pair); the pasted caption is on 14-19 too."""
    ids = [str(k) for k in range(3, 13)]
    moves = [(str(k), str(k + 1)) for k in range(3, 13) if k + 1 != 4]
    shift = Shift("captions.csv", "3", "12", 1, 10, 8, 9, 0.1, 1e-6, 0, ids, moves, ["3"])
    pasted = RepeatedCaption("a photo", 7, 7, 0, ["4", *[str(k) for k in range(14, 20)]])
    return JoinFindings(shifts=[shift], repeated_captions=[pasted])


def _read(script):
    return json.loads(script.removeprefix("window.mispairAudit = ").removesuffix(";\n"))


def test_a_runs_card_shows_its_ends_before_and_after_and_repairs_as_repair_csv():
    pairs, found = _pairs(), _findings()
    cards = finding_cards(found, pairs)
    thumbs = {image: f"thumbs/{image}.jpg" for image in cards.images()}
    data = _read(page_data(pairs.head(2), thumbs, audit="abc", threshold=0.5, findings=cards))
    shift, pasted = data["findings"]["cards"]
    assert data["findings"]["more"] == 0 and shift["sentence"] == found.shifts[0].sentence()
    assert shift["kind"] == "shift" and shift["offset"] == 1 and shift["pair_ids"] == found.shifts[0].pair_ids
    assert (shift["hidden"], shift["gap"]) == (5, 3)  # rows 3, 4, 5 ... 11, 12
    images = data["images"]
    shown = [[pair, images[image][0], now, after, state] for pair, image, now, after, state in shift["rows"]]
    assert shown == [
        ["3", "p3.png", "caption 3", None, "lost"],  # its own caption was on the row deleted above
        ["4", "p4.png", "caption 4", None, "same"],  # a pasted caption is never replaced
        ["5", "p5.png", "caption 5", "caption 4", "replace"],
        ["11", "p11.png", "caption 11", "caption 10", "replace"],
        ["12", "p12.png", "caption 12", "caption 11", "replace"],
    ]
    assert all(path == thumbs[image] for image, path in images if image in thumbs)
    written = repair_frame(found, pairs)[["pair_id", "decision", "caption"]].to_numpy().tolist()
    assert shift["repair"] == [[p, d, spreadsheet_text(c)] for p, d, c in written]
    assert ["8", "replace", "=1+1 <b>x</b>"] in shift["repair"]  # raw: the page's download makes it safe
    assert pasted["kind"] == "pasted" and pasted["repair"] == [] and pasted["hidden"] == 0
    assert [r[0] for r in pasted["rows"]] == ["4", "14", "15", "16", "17"]
    assert {r[4] for r in pasted["rows"]} == {"pasted"}
    assert pasted["pair_ids"] == found.repeated_captions[0].pair_ids


def test_a_short_run_shows_every_row_and_cards_beyond_most_are_counted():
    pairs = _pairs()
    ids = ["6", "7", "8"]
    short = Shift("captions.csv", "6", "8", -1, 3, 3, 3, 0.1, 1e-6, 0, ids, [("7", "6"), ("8", "7")], ["8"])
    found = JoinFindings(shifts=[short], repeated_captions=_findings().repeated_captions)
    cards = finding_cards(found, pairs, most=1)
    assert cards.more == 1 and len(cards.cards) == 1
    card = cards.cards[0]
    assert [(r.pair_id, r.caption_after, r.state) for r in card.rows] == [
        ("6", "=1+1 <b>x</b>", "replace"),
        ("7", "caption 8", "replace"),
        ("8", None, "lost"),
    ]
    assert card.hidden == 0 and card.to_page(lambda image: 0)["gap"] is None
    assert _read(page_data(pairs, {}, audit="abc", threshold=0.5))["findings"] is None

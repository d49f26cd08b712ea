"""The report's data (``pairs.js``) and thumbnails: every row of the table in rank order with its
suggestions (three columns or the single one), the audit id a digest of the ranking, thumbnails
written once per picture and stale ones removed."""

import json

import numpy as np
import pandas as pd
import pytest

from mispair.audit.page_data import FIELDS, page_data
from mispair.audit.thumbs import write_thumbnails


def _table(n=6, numbered=True):
    rng = np.random.default_rng(0)
    table = {
        "pair_id": [f"train/{k}" for k in range(n)],
        "image_id": [f"{k % 4}.png" for k in range(n)],
        "caption": [f"caption {k}" for k in range(n)],
        "split": ["train"] * n,
        "mismatch_probability": np.sort(rng.random(n))[::-1],
        "held_out_score": np.sort(rng.random(n)),
    }
    if numbered:
        for j in (1, 2, 3):
            table[f"suggested_caption_{j}"] = [f"caption {(k + j) % n}" for k in range(n)]
            table[f"suggested_caption_score_{j}"] = rng.random(n)
            table[f"suggested_image_id_{j}"] = [f"{(k + j) % 4}.png" for k in range(n)]
            table[f"suggested_image_score_{j}"] = rng.random(n)
        table["suggested_caption_3"][0] = None  # fewer than three suggestions for this row
        table["why"] = [f"reason {k}" for k in range(n)]
        table["duplicate_image_of"] = ["", "0.png", "", "", "", ""][:n]
        table["same_caption_images"] = [0, 0, 2, 0, 0, 0][:n]
        table["raw_similarity"] = rng.uniform(-1, 1, n)  # aligned embeddings' plain cosine
    else:
        table |= {
            "suggested_caption": [f"caption {(k + 1) % n}" for k in range(n)],
            "suggested_caption_score": rng.random(n),
            "suggested_image_id": ["3.png"] * n,
            "suggested_image_score": rng.random(n),
        }
    return pd.DataFrame(table)


def _read(script):
    assert script.startswith("window.mispairAudit = ") and script.endswith(";\n")
    return json.loads(script.removeprefix("window.mispairAudit = ").removesuffix(";\n"))


@pytest.mark.parametrize("numbered", [True, False])
def test_every_row_comes_in_rank_order_with_its_suggestions(numbered):
    table = _table(numbered=numbered)
    thumbs = {f"{k}.png": f"thumbs/{k}.jpg" for k in range(4)}
    data = _read(page_data(table, thumbs, audit="abc", threshold=0.5))
    assert data["fields"] == list(FIELDS) and data["audit_id"] == "abc" and data["threshold"] == 0.5
    images = data["images"]
    assert all(thumbs[image_id] == path for image_id, path in images)
    for row, (_, expected) in zip(data["rows"], table.iterrows(), strict=True):
        got = dict(zip(FIELDS, row))
        assert got["pair_id"] == expected["pair_id"] and got["caption"] == expected["caption"]
        assert images[got["image"]][0] == expected["image_id"]
        assert got["mismatch_probability"] == round(expected["mismatch_probability"], 3)
        stems = [f"_{j}" for j in (1, 2, 3)] if numbered else [""]
        captions = [
            (expected[f"suggested_caption{s}"], round(expected[f"suggested_caption_score{s}"], 3))
            for s in stems
            if pd.notna(expected[f"suggested_caption{s}"])
        ]
        assert [tuple(c) for c in got["suggested_captions"]] == captions
        pictures = [
            (expected[f"suggested_image_id{s}"], round(expected[f"suggested_image_score{s}"], 3))
            for s in stems
        ]
        assert [(images[i][0], s) for i, s in got["suggested_images"]] == pictures
        assert got["why"] == (expected["why"] if numbered else "")
        duplicate = expected.get("duplicate_image_of", "")
        assert (images[got["duplicate_image_of"]][0] if got["duplicate_image_of"] >= 0 else "") == duplicate
        assert got["duplicate_caption_count"] == expected.get("same_caption_images", 0)
        assert got["truly_mismatched"] is None
        assert got["raw_similarity"] == (round(expected["raw_similarity"], 3) if numbered else None)
    assert len(data["rows"][0][FIELDS.index("suggested_captions")]) == (2 if numbered else 1)


def test_thumbnails_are_written_once_and_stale_ones_removed(tmp_path):
    from PIL import Image

    pictures = tmp_path / "pictures"
    pictures.mkdir()
    for k in range(3):
        Image.new("RGB", (200, 120), (80 * k, 20, 200)).save(pictures / f"{k}.png")
    (pictures / "broken.png").write_bytes(b"not a picture")
    report = tmp_path / "report"
    first = write_thumbnails(["0.png", "1.png", "2.png", "broken.png", "0.png"], pictures, report)
    assert first["broken.png"] == "" and len({first[f"{k}.png"] for k in range(3)}) == 3
    with Image.open(report / first["0.png"]) as thumb:
        assert thumb.size == (96, 96) and thumb.format == "JPEG"
    written = {k: (report / v).stat().st_mtime_ns for k, v in first.items() if v}
    again = write_thumbnails(["0.png", "1.png"], pictures, report)
    assert again == {"0.png": first["0.png"], "1.png": first["1.png"]}
    assert all((report / again[k]).stat().st_mtime_ns == written[k] for k in again)  # not rewritten
    assert not (report / first["2.png"]).exists()  # no image names it any more
    left = sorted(p.name for p in (report / "thumbs").iterdir())
    assert left == sorted(v.split("/")[1] for v in again.values())
    assert write_thumbnails(["0.png"], None, tmp_path / "none") == {"0.png": ""}


def test_the_sample_carries_its_rows_strata_and_planned_look(monkeypatch):
    """The page's "check a sample": the first rows of the order with their strata, and of the whole
    order each stratum's size and mean probability (first places' order) and the planned look."""
    from mispair.audit import page_data as module
    from mispair.estimate.sample import audit_sample
    from mispair.estimate.share import planned_look

    monkeypatch.setattr(module, "SAMPLE_SHOWN", 3)
    table = _table(n=300, numbered=False).assign(suspected=lambda t: t["mismatch_probability"] > 0.9)
    sample = audit_sample(table, 4, "")
    rows = module.sample_rows(table, sample)
    data = _read(
        page_data(
            table, {}, audit="abc", threshold=0.5, sample=rows, design=module.sample_design(table, sample)
        )
    )
    shown = data["sample"]
    by_id = table.set_index("pair_id")["mismatch_probability"]
    assert [r[0] for r in shown["rows"]] == sample["pair_id"].head(3).tolist()
    assert [r[4] for r in shown["rows"]] == sample["stratum"].head(3).tolist()
    assert [r[3] for r in shown["rows"]] == by_id.loc[sample["pair_id"].head(3)].tolist()  # unrounded
    f = by_id.loc[sample["pair_id"]].to_numpy()
    strata = sample["stratum"].to_numpy(dtype=object)
    assert [s[0] for s in shown["strata"]] == list(dict.fromkeys(strata))
    assert {s[0] for s in shown["strata"]} - {r[4] for r in shown["rows"]}  # a stratum past the rows
    for name, pairs, mean, at_look in shown["strata"]:
        total = 0.0
        for value in f[strata == name]:  # left to right, as the estimate adds
            total += value
        assert pairs == (strata == name).sum() and mean == total / pairs
        assert at_look == (strata[: planned_look(f, strata)] == name).sum()
    assert shown["n_pairs"] == 300 and shown["look"] == planned_look(f, strata)

    older = sample.drop(columns="stratum")  # an audit's sample before the strata: one stratum
    design = module.sample_design(table, older)
    assert [s[:2] for s in design["strata"]] == [["all", 300]]
    assert set(module.sample_rows(table, older)["stratum"]) == {"all"}


def test_the_sample_carries_the_cut_its_order_digest_and_the_proof_constants():
    """What the page's proven drop and blind-spot warning need: the cut stratum ranked as
    ``proven_cut`` ranks it (``suspicion_score``, most suspect first), its cuts, the places of its
    pairs in the order, each row's verdict, the rate and the constants; and the order's digest,
    which keys the answers the page stores."""
    import hashlib

    from mispair.audit import page_data as module
    from mispair.estimate.audit_estimate import suspicion_score
    from mispair.estimate.sample import audit_sample
    from mispair.estimate.selection import DELTA, INTERVAL_DELTA, cut_sizes
    from mispair.estimate.share import Z_975
    from mispair.estimate.trust import BLIND_SPOT_AUC, BLIND_SPOT_RECALL

    table = _table(n=300, numbered=False).assign(suspected=lambda t: t["mismatch_probability"] > 0.8)
    table["held_out_score"] = np.round(table["held_out_score"], 1)  # ties in the score, broken by rank
    sample = audit_sample(table, 4, "")
    design = module.sample_design(table, sample, fdr=0.05)
    order = sample["pair_id"].tolist()
    assert design["digest"] == hashlib.sha256("\n".join(order).encode()).hexdigest()[:16]
    assert design["digest"] != module.sample_design(table, audit_sample(table, 5, ""))["digest"]
    suspicion = dict(zip(table["pair_id"], suspicion_score(table)))
    cut = [i for i, s in zip(order, sample["stratum"]) if s == "cut"]
    assert len(cut) == table["suspected"].sum() > 30
    assert design["cut_ids"] == sorted(cut, key=lambda i: -suspicion[i])
    assert design["cut_sizes"] == cut_sizes(len(cut))
    assert [order[k] for k in design["cut_places"]] == cut  # in the sample's order
    assert (design["fdr"], design["delta"], design["interval_delta"]) == (0.05, DELTA, INTERVAL_DELTA)
    assert (design["z_975"], design["z_975_squared"]) == (Z_975, Z_975**2)
    assert (design["blind_spot_recall"], design["blind_spot_auc"]) == (BLIND_SPOT_RECALL, BLIND_SPOT_AUC)
    assert module.sample_design(table, sample)["fdr"] == module.FDR

    data = _read(page_data(table, {}, audit="abc", threshold=0.5, sample=module.sample_rows(table, sample)))
    flags = table.set_index("pair_id")["suspected"]
    assert [r[5] for r in data["sample"]["rows"]] == [int(flags[i]) for i in order]
    unflagged = table.drop(columns="suspected")
    rows = _read(
        page_data(unflagged, {}, audit="abc", threshold=0.5, sample=module.sample_rows(unflagged, sample))
    )
    assert {r[5] for r in rows["sample"]["rows"]} == {None}  # no verdicts: no blind-spot warning


def test_the_page_proves_the_drop_at_the_audits_fdr():
    """The rate is the audit's ``--fdr`` as its summary records it, else the audit's default."""
    from mispair.audit.page_data import FDR
    from mispair.audit.report import page_fdr
    from mispair.audit.run import DEFAULT_FDR
    from mispair.audit.summary import AuditSummary, CalibrationPart

    assert FDR == DEFAULT_FDR
    summary = AuditSummary(collection="c", threshold=0.5)
    assert page_fdr(summary) == DEFAULT_FDR
    summary.calibration = CalibrationPart(method="decoys", note="", fdr=0.05)
    assert page_fdr(summary) == 0.05


def test_a_share_interval_that_reaches_0_says_check_a_sample():
    """Issue 63: "may hold no mismatched pair" only with "of the kind the scores see — check a
    sample" (a near miss scores like a correct pair); the note is the page's and the command
    line's trust line."""
    from mispair.audit.words import separation_note
    from mispair.division.calibration import Calibration

    empty = np.zeros(0)
    calibration = Calibration(0.16, 0.0, 0.23, 0.95, empty, empty, empty, 500, 0.9, 0.5, 0.3)
    note = separation_note(calibration)
    assert "may hold no mismatched pair of the kind the scores see — check a sample" in note

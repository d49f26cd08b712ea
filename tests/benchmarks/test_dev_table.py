"""benchmarks/dev_table.py on fake result files: dev means only, incomplete variants left out."""

import importlib
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def dev_table(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("dev_table")


def test_the_table_gives_dev_means_and_drops_incomplete_variants(dev_table, tmp_path, monkeypatch, capsys):
    run_key = importlib.import_module("compare_recipes").run_key
    for seed, (dev, auc) in enumerate([(100, 0.8), (110, 0.9)]):
        detection = {"division/auc": auc, "division/precision": 0.5, "division/recall": 0.25 * (seed + 1)}
        record = {"dev": {"rsum": dev}, "test": {"rsum": 999}, "detection": detection}
        (tmp_path / f"{run_key('tuxpaint', 'a', 0.7, seed, [])}.json").write_text(json.dumps(record))
    record = {"dev": {"rsum": 1}, "test": {"rsum": 1}}
    (tmp_path / f"{run_key('tuxpaint', 'b', 0.7, 0, [])}.json").write_text(json.dumps(record))
    argv = ["x", "--results", str(tmp_path), "--noise", "0.7", "--seeds", "0", "1", "--variants", "a", "b"]
    monkeypatch.setattr(sys, "argv", argv)
    dev_table.main()
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| tuxpaint")]
    assert rows == ["| tuxpaint | 0.7 | a | 2 | 105.0 | 0.850 | 0.50 / 0.38 |"]

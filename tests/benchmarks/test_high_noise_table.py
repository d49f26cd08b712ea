"""benchmarks/high_noise_table.py on fake result files: the gap each recipe closes between the
bounds' means, at its configuration chosen on dev, and its kept precision / recall."""

import importlib
import json
import statistics
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def table(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("high_noise_table")


def _write(folder, key, dev, test, detection=None):
    record = {"dev": {"rsum": dev}, "test": {"rsum": test}, "detection": detection}
    (folder / f"{key}.json").write_text(json.dumps(record))


def test_each_recipe_closes_its_share_of_the_bounds_gap(table, tmp_path, monkeypatch, capsys):
    fair, bounds = tmp_path / "fair", tmp_path / "bounds"
    fair.mkdir(), bounds.mkdir()
    grid = importlib.import_module("fair_grid").grid
    run_key = importlib.import_module("compare_recipes").run_key
    baseline, oracle, ours = [100, 110, 90, 100, 100], [200, 210, 190, 200, 200], [150, 160, 140, 150, 175]
    for seed in range(5):
        _write(bounds, run_key("tuxpaint", "vse2-infonce", 0.7, seed, []), 0, baseline[seed])
        _write(bounds, run_key("tuxpaint", "vse2-oracle-infonce", 0.7, seed, []), 0, oracle[seed])
    for i, config in enumerate(grid("holdout", 4)):  # the second configuration wins on dev
        for seed in (0, 1):
            _write(fair, run_key("tuxpaint", "holdout", 0.7, seed, config), 100 - abs(i - 1), 999)
    best = grid("holdout", 4)[1]
    for seed in range(5):
        kept = {"division/precision": 0.5 + seed / 10, "division/recall": 0.9}
        _write(fair, run_key("tuxpaint", "holdout", 0.7, seed, best), 100, ours[seed], kept)
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    for seed in range(5):  # a variant at one configuration: read as run, no selection
        _write(fixed, run_key("tuxpaint", "holdout-x", 0.7, seed, []), 0, 200)
    argv = ["x", "--datasets", "tuxpaint", "--noise", "0.7", "--recipes", "holdout", "--fixed", "holdout-x"]
    paths = ["--fair", str(fair), "--bounds", str(bounds), "--fixed-results", str(fixed)]
    monkeypatch.setattr(sys, "argv", [*argv, *paths])
    table.main()
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| tuxpaint"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    gap = (statistics.mean(ours) - statistics.mean(baseline)) / (
        statistics.mean(oracle) - statistics.mean(baseline)
    )
    assert cells[3] == f"{statistics.mean(ours):.1f} ± {statistics.stdev(ours):.1f} ({gap:.0%})"
    assert cells[4] == f"{statistics.mean([0.5, 0.6, 0.7, 0.8, 0.9]):.2f} / 0.90"
    assert cells[5] == "200.0 ± 0.0 (100%)" and cells[6] == ""  # the fixed variant: the oracle's mean
    assert cells[2].startswith(f"{statistics.mean(baseline):.1f}") and cells[7].startswith("200.0")
    assert "999" not in row

"""benchmarks/plots.py: the figures' numbers are the tables' (gap closed from the committed fair
grid and bounds, as docs/results.md prints it) and the reliability bins are a hand count."""

import importlib
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def plots(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("plots")


def test_gap_closed_is_the_tables_on_the_committed_results(plots):
    results = BENCHMARKS / "results"
    table = plots.gap_table(
        results / "fair", results / "pretrained", ["tuxpaint", "openclipart"], [0.4, 0.7], ["holdout", "rcl"]
    )
    # docs/results.md, "High noise": holdout 258.5 / 106.2 between vse2-infonce 244.5 / 94.0 and
    # vse2-oracle-infonce 290.5 / 111.0 (means over seeds 0-4, printed to 0.1)
    assert table[("tuxpaint", 0.4, "holdout")][0] == pytest.approx(
        (258.5 - 244.5) / (290.5 - 244.5), abs=0.005
    )
    assert table[("openclipart", 0.4, "holdout")][0] == pytest.approx(
        (106.2 - 94.0) / (111.0 - 94.0), abs=0.01
    )
    assert table[("tuxpaint", 0.7, "rcl")][0] < 0  # below the plain two-model baseline, drawn so
    assert all(spread > 0 for _, spread in table.values())


def test_reliability_bins_count_by_hand(plots):
    p = np.array([0.05, 0.15, 0.12, 1.0, 0.95])
    truth = np.array([False, True, False, True, False])
    bins = plots.reliability(p, truth)
    assert [n for *_, n in bins] == [1, 2, 2]  # bins 0, 1 and 9 (1.0 falls in the last)
    assert bins[1][:2] == pytest.approx((0.135, 0.5)) and bins[2][:2] == pytest.approx((0.975, 0.5))

"""benchmarks/labelled_sample.py: its running-sum intervals equal the estimators' at every n (the
benchmark simulates thousands of reviewers with them: the uniform order's PPI interval and the
stratified design's), and a quick run over committed score files gives a table whose every
interval row is present."""

import importlib
from pathlib import Path

import numpy as np
import pytest

from mispair.estimate.sample import sample_order
from mispair.estimate.share import anytime_share, labels_only_share, planned_look, stratified_share

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("labelled_sample")


def test_the_running_sums_give_the_estimators_interval_at_every_n(bench):
    rng = np.random.default_rng(0)
    truth = (rng.random(300) < 0.3).astype(float)
    p = np.clip(truth * 0.5 + rng.random(300) * 0.5, 0, 1)
    share, low, high, half = bench.prefix_intervals(truth, p, 0.37, True)
    alone = bench.prefix_intervals(truth, p, 0.37, False)
    for n in range(1, 301):
        found = anytime_share(truth[:n], p[:n], 0.37)
        assert (share[n - 1], low[n - 1], high[n - 1]) == pytest.approx(
            (found.share, found.low, found.high), abs=1e-9
        )
        only = labels_only_share(truth[:n], 0.37)
        assert (alone[0][n - 1], alone[1][n - 1], alone[2][n - 1]) == pytest.approx(
            (only.share, only.low, only.high), abs=1e-9
        )
        assert half[n - 1] <= alone[3][n - 1] + 1e-12  # never wider before clipping


def test_the_design_s_running_sums_give_the_stratified_interval_at_every_n(bench):
    rng = np.random.default_rng(1)
    truth = (rng.random(400) < 0.3).astype(float)
    p = np.clip(truth * 0.5 + rng.random(400) * 0.5, 0, 1)
    sample = sample_order([str(i) for i in range(400)], 2, p, p > 0.8)
    at, strata = sample["pair_id"].astype(int).to_numpy(), sample["stratum"].to_numpy()
    look = planned_look(p[at], strata)
    low, high, _, _ = bench.stratified_prefixes(truth[at], p[at], strata, look)
    assert look < 400  # the look is inside the run, so its intersection is compared too
    estimate = bench.stratified_estimates(truth[at], p[at], strata)
    for n in range(1, 400):
        found, _ = stratified_share(truth[at[:n]], p[at], strata)
        assert (low[n - 1], high[n - 1]) == pytest.approx((found.low, found.high), abs=1e-9)
        assert estimate[n - 1] == pytest.approx(found.share, abs=1e-12)


def test_a_quick_run_tables_every_size(bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "COLLECTIONS", ("tuxpaint",))
    monkeypatch.setattr(bench, "SEEDS", (0,))
    assert bench.main(["--reviewers", "2", "--stoppers", "2"]) == 0
    table = capsys.readouterr().out
    for n in bench.SIZES:
        assert "| tuxpaint_r0.4 | 0.400 |" in table and f"| {n} |" in table
    assert "## The proven drop at 100 answers" in table and "Least coverage over the score files" in table

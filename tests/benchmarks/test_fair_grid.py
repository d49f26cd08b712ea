"""benchmarks/fair_grid.py on fake result files: selection on dev, test numbers of the chosen
configuration only, and the paired comparison (no training)."""

import importlib
import json
import math
import statistics
from argparse import Namespace
from pathlib import Path

import pytest
from scipy import stats

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def fair(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("fair_grid")


def _write(fair, results, recipe, config, seed, dev, test, noise=0.4, detection=None):
    key = fair.run_key("tuxpaint", recipe, noise, seed, config)
    record = {"seed": seed, "dev": {"rsum": dev}, "test": {"rsum": test, "i2t_r1": 1.0, "t2i_r1": 2.0}}
    record["detection"] = detection
    (results / f"{key}.json").write_text(json.dumps(record))


def _args(results, recipes, **extra):
    defaults = dict(
        datasets=["tuxpaint"],
        noise=[0.4],
        recipes=recipes,
        budget=4,
        select_seeds=[0, 1],
        report_seeds=[0, 1, 2, 3, 4],
        reference="holdout",
        set=[],
        results=results,
    )
    return Namespace(**(defaults | extra))


def test_every_grid_has_the_budget_and_names_a_variant(fair):
    for recipe in fair.GRIDS:
        assert recipe in fair.VARIANTS
        configs = fair.grid(recipe, 4)
        assert len(configs) == 4 and len({tuple(c) for c in configs}) == 4
    with pytest.raises(SystemExit):
        fair.grid("holdout", 5)


def test_selection_is_on_mean_dev_rsum_not_test(fair, tmp_path):
    configs = fair.grid("holdout", 4)
    # config 2 has the best mean dev (mean 210), config 3 the best test and one higher dev seed
    devs = {0: (200, 200), 1: (190, 205), 2: (215, 205), 3: (230, 180)}
    for i, config in enumerate(configs):
        for seed, dev in zip((0, 1), devs[i]):
            _write(fair, tmp_path, "holdout", config, seed, dev, test=300 if i == 3 else 100)
    chosen = fair.chosen_configs(_args(tmp_path, ["holdout"]))
    assert chosen[("tuxpaint", 0.4, "holdout")] == configs[2]


def test_ties_go_to_the_earlier_configuration_and_missing_runs_hold_the_selection(fair):
    configs = [["a=1"], ["a=2"], ["a=3"]]
    runs = [[{"dev": {"rsum": x}}] * 2 for x in (5.0, 7.0, 7.0)]
    assert fair.select(configs, runs, 2) == 1
    assert fair.select(configs, [runs[0], runs[1], runs[2][:1]], 2) is None


def test_paired_difference_and_p_values_by_hand(fair):
    ours = [210.0, 205.0, 220.0, 190.0, 200.0]
    theirs = [200.0, 204.0, 212.0, 180.0, 199.0]
    runs = [{"seed": s, "test": {"rsum": x}} for s, x in enumerate(ours)]
    ref = [{"seed": s, "test": {"rsum": x}} for s, x in enumerate(theirs)] + [
        {"seed": 9, "test": {"rsum": 0}}
    ]
    result = fair.paired(runs, ref)
    diff = [1.0 * (a - b) for a, b in zip(ours, theirs)]  # 10, 1, 8, 10, 1: every difference > 0
    mean, sd = sum(diff) / 5, math.sqrt(sum((d - sum(diff) / 5) ** 2 for d in diff) / 4)
    assert result["n"] == 5 and result["mean"] == pytest.approx(6.0) and result["std"] == pytest.approx(sd)
    t = mean / (sd / math.sqrt(5))
    assert result["p_t"] == pytest.approx(2 * stats.t.sf(t, df=4), rel=1e-9)
    assert result["p_wilcoxon"] == pytest.approx(2 / 2**5)  # all five signs positive: exact, two-sided
    assert fair.paired(runs[:1], ref) is None
    same = fair.paired(runs, runs)
    assert same["mean"] == 0 and same["p_t"] == same["p_wilcoxon"] == 1.0


def test_report_prints_the_chosen_configurations_test_numbers_and_pairs_them(fair, tmp_path, capsys):
    tests = {"holdout": [230, 232, 228, 231, 229], "asl-infonce": [225, 230, 226, 228, 224]}
    for recipe, values in tests.items():
        for i, config in enumerate(fair.grid(recipe, 4)):
            for seed in (0, 1):  # the last configuration wins on dev
                _write(fair, tmp_path, recipe, config, seed, dev=100 + i, test=999)
        best = fair.grid(recipe, 4)[3]
        for seed, value in enumerate(values):
            kept = {"division/0/auc": 0.9, "division/0/precision": 0.8 + seed / 100, "division/0/recall": 0.7}
            detection = kept if recipe == "holdout" else None
            _write(fair, tmp_path, recipe, best, seed, dev=103, test=value, detection=detection)
    args = _args(tmp_path, ["holdout", "asl-infonce"])
    fair.print_report(args, fair.chosen_configs(args))
    rows = {
        line.split(" | ")[2]: line for line in capsys.readouterr().out.splitlines() if "| tuxpaint" in line
    }
    asl = rows["asl-infonce"]
    assert " ".join(fair.grid("asl-infonce", 4)[3]) + " (103.0)" in asl
    assert (
        f"{statistics.mean(tests['asl-infonce']):.1f} ± {statistics.stdev(tests['asl-infonce']):.1f}" in asl
    )
    assert "999" not in asl
    diff = [a - b for a, b in zip(tests["asl-infonce"], tests["holdout"])]
    assert f"{statistics.mean(diff):+.1f} ± {statistics.stdev(diff):.1f} (n=5)" in asl
    assert "| | | | 0.900 | 0.820 | 0.700 |" in rows["holdout"]  # not paired with itself; its division
    assert asl.endswith("| | | |")  # no division recorded

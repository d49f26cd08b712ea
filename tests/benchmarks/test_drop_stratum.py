"""benchmarks/drop_stratum.py's ceiling: the drop from an oracle-sized cut stratum finds every
mismatched pair where the ranking is perfect and the stratum is exactly the mismatched pairs,
finds none beyond the judged ones where the stratum holds only correct pairs, and the stratum a
search over sizes picks is the one that finds the most (a brute-force loop over the same grid)."""

import importlib
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("drop_stratum")


def perfect(pairs: int = 600, mismatched: int = 150) -> tuple[np.ndarray, np.ndarray]:
    """(suspicion, truth): the mismatched pairs ranked first."""
    truth = np.zeros(pairs)
    truth[:mismatched] = 1
    return -np.arange(pairs, dtype=float), truth


def test_a_pure_stratum_of_every_mismatched_pair_is_proven_whole(bench):
    suspicion, truth = perfect()
    assert bench.oracle_stratum_found(suspicion, truth, 150, 50, 5, 0) == 1.0


def test_a_stratum_of_correct_pairs_drops_only_the_judged_mismatched(bench):
    suspicion, truth = perfect()
    reversed_suspicion = -suspicion  # the correct pairs first
    found = bench.oracle_stratum_found(reversed_suspicion, truth, 200, 50, 20, 0)
    # the 50 answers outside the top 200 fall among the 400 others, 150 of them mismatched:
    # a hypergeometric mean of 50 · 150 / 400 judged mismatched, of 150 mismatched in all
    assert found == pytest.approx(50 * 150 / 400 / 150, abs=0.05)


def test_the_ceiling_picks_the_size_that_finds_most_on_its_own_reviewers(bench):
    rng = np.random.default_rng(1)
    truth = (rng.random(400) < 0.3).astype(float)
    suspicion = truth + rng.normal(scale=0.6, size=400)
    scored = type("Scored", (), {"suspicion": suspicion, "truth": truth})()
    found, top = bench.ceiling(scored, 50, 12)
    grid = range(60, 200, 5)
    quick = [bench.oracle_stratum_found(suspicion, truth, k, 50, 10, 7) for k in grid]
    assert top == grid[int(np.argmax(quick))]
    assert found == bench.oracle_stratum_found(suspicion, truth, top, 50, 12, 2000)

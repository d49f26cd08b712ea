"""The division probe's precision at a recall, against a brute-force loop over cut-offs."""

import importlib
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))  # the benchmarks import each other by name
precision_at_recall = importlib.import_module("division_probe").precision_at_recall


def loop_precision_at_recall(score, clean, recall):
    order = sorted(range(len(score)), key=lambda i: -score[i])  # stable: ties keep their order
    for k in range(1, len(score) + 1):
        found = sum(clean[i] for i in order[:k])
        if found >= recall * sum(clean) - 1e-9:
            return found / k
    raise AssertionError("unreachable: all pairs reach every recall")


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    n=st.integers(2, 40),
    recall=st.sampled_from([0.1, 0.5, 0.7, 0.9, 1.0]),
)
def test_precision_at_recall_is_the_shortest_top_list_reaching_it(seed, n, recall):
    rng = np.random.default_rng(seed)
    score = rng.integers(0, 5, n).astype(float)  # ties included
    clean = rng.random(n) < 0.4
    clean[0] = True
    assert precision_at_recall(score, clean, recall) == loop_precision_at_recall(score, clean, recall)

"""The division probe's precision at a recall, against a brute-force loop over cut-offs."""

import numpy as np
from benchmarks.division_probe import precision_at_recall
from hypothesis import given, settings
from hypothesis import strategies as st


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

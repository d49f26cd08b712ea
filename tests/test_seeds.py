"""Every seed a run derives comes from ``child_seed``, and each purpose keeps the formula the runs
used before it existed (so no run's numbers moved): checked against those formulas written out."""

import doctest

import pytest

import mispair.seeds
from mispair.seeds import PURPOSES, child_seed

BEFORE = {  # the formulas as they stood at their call sites
    "model": lambda s, k: s * 7919 + k,
    "epoch": lambda s, e: s * 100_003 + e,
    "division": lambda s, e: s * 31 + e,
    "model batches": lambda s, k: s * 2 + k,
    "cycle": lambda s, r: s * 1000 + r,
    "noisy batches": lambda s: s + 1,
    "repeat": lambda s, r: s if r == 0 else s + 1_000_003 * r,
    "fold": lambda s, k, folds: s * folds + k,
    "batch labels": lambda e, first: first + 7919 * e,
    "decoys": lambda s: s * 7 + 424_242,  # new with the audit's decoys (issue 48): its formula as made
    "trust": lambda s, held: (s * 65_537 + held) % 2**32,  # new with nested trust's lattice (issue 48)
    "sample": lambda s: s * 13 + 575_757,  # new with the labelled sample (issue 57)
}


@pytest.mark.parametrize("purpose", sorted(PURPOSES))
def test_each_purpose_keeps_its_formula(purpose):
    arity = BEFORE[purpose].__code__.co_argcount - 1
    for seed in (0, 1, 7, 12345):
        for index in range(4):
            indices = (index, 5)[:arity]
            assert child_seed(seed, purpose, *indices) == BEFORE[purpose](seed, *indices)


def test_every_purpose_is_listed_and_an_unknown_one_fails():
    assert set(PURPOSES) == set(BEFORE)
    with pytest.raises(KeyError):
        child_seed(0, "shuffle")


def test_the_examples_run():
    assert doctest.testmod(mispair.seeds).failed == 0

"""One derivation of every seed a run uses from its seed (``train.seed``) and a purpose.

Each random stream of a run (a model's initialisation, an epoch's shuffling and dropout, a
division's batches, a scorer's folds, ...) is seeded by :func:`child_seed` from the run's seed,
the stream's purpose and its indices (which model, which epoch). The purposes and their formulas
are listed in :data:`PURPOSES`; the formulas are those the runs have always used, so a run's
numbers do not move with this module. A new stream adds a purpose here rather than a formula at
its call site.

>>> child_seed(3, "model", 1)
23758
>>> child_seed(3, "epoch", 2)
300011
"""

from __future__ import annotations

from collections.abc import Callable

PURPOSES: dict[str, Callable[..., int]] = {
    # model k of a run, freshly initialised: seed · 7919 + k
    "model": lambda seed, k: seed * 7919 + k,
    # epoch e's shuffling, dropout and recipe randomness: seed · 100003 + e (the "epoch seed")
    "epoch": lambda seed, epoch: seed * 100_003 + epoch,
    # the per-sample losses a division scores at epoch e, in batches: seed · 31 + e
    "division": lambda seed, epoch: seed * 31 + epoch,
    # co-trained model k's batches within an epoch (from the epoch seed): seed · 2 + k
    "model batches": lambda seed, k: seed * 2 + k,
    # pass r over a subset cycled endlessly (from a batch seed): seed · 1000 + r
    "cycle": lambda seed, r: seed * 1000 + r,
    # L2RM's batches of mismatched pairs beside the matched ones (from the epoch seed): seed + 1
    "noisy batches": lambda seed: seed + 1,
    # repeat r's partition into folds of an out-of-fold scoring: the run seed itself for the first
    # (one repeat scores as before repeats existed), far from every run seed for the others
    "repeat": lambda seed, r: seed if r == 0 else seed + 1_000_003 * r,
    # the scorer of fold k of ``folds`` (from its repeat's seed): seed · folds + k
    "fold": lambda seed, k, folds: seed * folds + k,
    # the scorer of nested trust that holds out the folds of bitmask ``held`` (from its repeat's
    # seed): seed · 65537 + held, modulo 2³² (a seed's range)
    "trust": lambda seed, held: (seed * 65_537 + held) % 2**32,
    # the decoy pairs of a held-out scoring (captions shown with other images: the audit's null)
    "decoys": lambda seed: seed * 7 + 424_242,
    # the audit's random order of its pairs for a person to judge (sample.csv)
    "sample": lambda seed: seed * 13 + 575_757,
    # RCL's complementary labels of a batch at epoch e whose first pair is i (the epoch is the
    # seed here): i + 7919 · e
    "batch labels": lambda epoch, first: first + 7919 * epoch,
}
"""Every purpose :func:`child_seed` knows, with the formula of its seed."""


def child_seed(run_seed: int, purpose: str, *indices: int) -> int:
    """The seed of the stream ``purpose`` (a key of :data:`PURPOSES`) at ``indices`` (e.g. model
    ``k``, epoch ``e``) of a run seeded ``run_seed`` (or of the parent stream's seed, where
    :data:`PURPOSES` says so). An unknown purpose is a ``KeyError``: every stream is listed."""
    return int(PURPOSES[purpose](int(run_seed), *(int(i) for i in indices)))

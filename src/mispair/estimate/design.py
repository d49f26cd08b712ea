"""Where a person's answers go: the audit's pairs split into strata by their calibrated mismatch
probability, and a schedule that says, for every place of the sample order, which stratum its
pair comes from.

**The strata.** ``cut`` (the pairs the audit suspects: what "drop them" would drop), then the
other pairs by probability band: ``likely`` (≥ 0.5), ``edge`` (0.2–0.5), ``low`` (0.05–0.2),
``rest`` (< 0.05). A stratum with no pair is left out.

**The schedule.** Place ``t`` of the order takes its pair from the stratum furthest behind its
target count ``t · a_h`` (ties to the first stratum; a stratum whose pairs are all placed is
skipped and the others' shares grow in proportion), and within each stratum the pairs come in a
uniformly random order. So the first ``n`` places of the order hold, for every ``n``, a simple
random sample (without replacement) of each stratum whose size ``n_h(n)`` is a fixed function of
``n``: a stratified random sample, which :func:`~mispair.estimate.share.stratified_share`
weighs back to the whole collection (its estimate is unbiased whatever the probabilities'
quality; they only decide how tight it is).

**The allocation.** ``a_h ∝ N_h · S_h`` (Neyman's allocation, which minimises the variance of
the stratified mean for a fixed number of answers; Cochran, *Sampling techniques*, 1977, §5.5)
with ``S_h = sqrt(mean f(1 − f))`` over the stratum, the residual's standard deviation were the
probabilities ``f`` calibrated, floored at :data:`FLOOR` so that a stratum the scores call
certain still gets answers (a near miss the scores read as a sure match is found there). Then the
cut's share is raised to at least :data:`CUT_SHARE` until it holds :data:`CUT_CHECK` answers:
its proof (:func:`~mispair.estimate.selection.proven_cut`) needs a few dozen answers inside it,
and a stratified estimate is unbiased under any allocation.
"""

from __future__ import annotations

import functools
import math

import numpy as np

STRATA = ("cut", "likely", "edge", "low", "rest")
"""The strata's names, in the order their ties are broken."""
BANDS = (0.5, 0.2, 0.05)
"""The probability bands' lower edges of ``likely``, ``edge`` and ``low``."""
FLOOR = 0.15
"""The least per-answer standard deviation a stratum is allotted answers for."""
CUT_SHARE = 0.6
"""The cut's least share of the answers until it holds :data:`CUT_CHECK` of them."""
CUT_CHECK = 50
"""The answers inside the cut that its early share secures (fewer when the cut is smaller)."""


def strata_of(probability: np.ndarray, suspected: np.ndarray | None) -> np.ndarray:
    """``[N]`` each pair's stratum name (:data:`STRATA`) from its calibrated mismatch
    ``probability [N]`` and the audit's ``suspected [N]`` flags (None: no cut)."""
    p = np.nan_to_num(np.asarray(probability, dtype=np.float64), nan=0.0)
    names = np.select([p >= BANDS[0], p >= BANDS[1], p >= BANDS[2]], list(STRATA[1:4]), STRATA[4])
    if suspected is not None:
        names = np.where(np.asarray(suspected, dtype=bool), STRATA[0], names)
    return names.astype(object)


def allocation(probability: np.ndarray, strata: np.ndarray) -> dict[str, float]:
    """Each present stratum's long-run share of the answers, ``a_h ∝ N_h · max(S_h, FLOOR)``
    (the module's Neyman allocation), summing to 1."""
    p = np.clip(np.nan_to_num(np.asarray(probability, dtype=np.float64), nan=0.0), 0.0, 1.0)
    weight = {}
    for name in STRATA:
        inside = strata == name
        if inside.any():
            spread = float(np.sqrt(np.mean(p[inside] * (1 - p[inside]))))
            weight[name] = float(inside.sum()) * max(spread, FLOOR)
    total = sum(weight.values())
    return {name: w / total for name, w in weight.items()}


def schedule(sizes: dict[str, int], shares: dict[str, float]) -> np.ndarray:
    """``[Σ sizes]`` the stratum of each place of the sample order (the module's schedule): the
    stratum furthest behind ``t · a_h`` at each place ``t``, with the cut's share raised to
    :data:`CUT_SHARE` until it holds :data:`CUT_CHECK` answers. It depends on the sizes and
    shares alone (not on the seed), so it is drawn once per design."""
    names = tuple(name for name in STRATA if sizes.get(name, 0) > 0)
    plan = _schedule(tuple(sizes[n] for n in names), tuple(shares[n] for n in names), names[:1] == ("cut",))
    return np.array([names[k] for k in plan], dtype=object)


@functools.lru_cache(maxsize=16)
def _schedule(sizes: tuple[int, ...], shares: tuple[float, ...], has_cut: bool) -> tuple[int, ...]:
    """:func:`schedule` as stratum indices (plain Python floats, in the same order of operations
    at every place: a few strata, up to millions of places)."""
    left, placed = list(sizes), [0] * len(sizes)
    target = [0.0] * len(sizes)
    check = min(CUT_CHECK, sizes[0]) if has_cut else 0
    out = []
    for _ in range(sum(sizes)):
        share = list(shares)
        if has_cut and placed[0] < check and share[0] < CUT_SHARE:
            others = sum(share[1:])
            share = [CUT_SHARE] + [v * (1 - CUT_SHARE) / others if others > 0 else 0.0 for v in share[1:]]
        share = [v if left[k] > 0 else 0.0 for k, v in enumerate(share)]
        total = sum(share)
        best, behind = -1, -math.inf
        for k, v in enumerate(share):
            target[k] += v / total
            if left[k] > 0 and target[k] - placed[k] > behind:
                best, behind = k, target[k] - placed[k]
        placed[best] += 1
        left[best] -= 1
        out.append(best)
    return tuple(out)


def stratified_order(
    pair_ids: list[str], strata: np.ndarray, shares: dict[str, float], rng: np.random.Generator
) -> np.ndarray:
    """``[N]`` positions into ``pair_ids`` in sample order: the :func:`schedule` of the strata,
    each filled from a uniformly random order of its own pairs (drawn stratum by stratum, in
    :data:`STRATA`'s order, from ``rng``)."""
    queues = {}
    for name in STRATA:
        members = np.flatnonzero(strata == name)
        if len(members):
            queues[name] = list(members[rng.permutation(len(members))])
    plan = schedule({name: len(q) for name, q in queues.items()}, shares)
    cursor = dict.fromkeys(queues, 0)
    order = np.empty(len(pair_ids), dtype=np.int64)
    for t, name in enumerate(plan):
        order[t] = queues[name][cursor[name]]
        cursor[name] += 1
    return order

"""Where a person's answers go: the audit's pairs split into strata by their calibrated mismatch
probability, and a schedule that says, for every place of the sample order, which stratum its
pair comes from.

**The strata.** ``cut`` (the pairs the audit suspects: what "drop them" would drop), then the
other pairs by probability band: ``likely`` (≥ 0.5), ``edge`` (0.2–0.5), ``low`` (0.05–0.2),
``rest`` (< 0.05). A stratum with no pair is left out.

**The schedule.** Place ``t`` of the order takes its pair from the stratum whose next answer
lowers the planned look's predicted variance the most (:func:`predicted_variance`: each
stratum's share its mean probability, its variance Agresti–Coull's as the estimate takes it, with
the finite-population correction), ties to the first stratum, and within each stratum the pairs
come in a uniformly random order. So the first ``n`` places of the order hold, for every ``n``, a
simple random sample (without replacement) of each stratum whose size ``n_h(n)`` is a fixed
function of ``n``: a stratified random sample, which
:func:`~mispair.estimate.share.stratified_share` weighs back to the whole collection (its
estimate is unbiased whatever the probabilities' quality; they only decide how tight it is).

**The allocation** this greedy order gives is, at every ``n``, the integer allocation that
minimises the predicted variance ``Σ_h W_h² (1 − n_h/N_h) p̃_h(1 − p̃_h) / n_h`` (the terms are
convex in ``n_h``, so marginal allocation is exact: Wright, *Exact optimal sample allocation:
more efficient than Neyman*, Stat. Probab. Lett. 2017; Neyman's ``a_h ∝ N_h S_h``, Cochran 1977
§5.5, is its continuous limit without Agresti–Coull's pseudo-answers). A stratum the scores call
certain still gets answers: its pseudo-answers keep its predicted variance up until it has some,
so a near miss the scores read as a sure match is found there. The cut takes at least
:data:`CUT_SHARE` of the places until it holds :data:`CUT_CHECK` answers: its proof
(:func:`~mispair.estimate.selection.proven_cut`) needs a few dozen answers inside it, and a
stratified estimate is unbiased under any allocation. Against the Neyman order it replaced (with
a floor of 0.15 on each stratum's deviation) it reaches ± 3 points 5–8% sooner on the
calibration collections (``benchmarks/results/labelled_sample.md``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

STRATA = ("cut", "likely", "edge", "low", "rest")
"""The strata's names, in the order their ties are broken."""
BANDS = (0.5, 0.2, 0.05)
"""The probability bands' lower edges of ``likely``, ``edge`` and ``low``."""
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


def stratum_means(probability: np.ndarray, strata: np.ndarray) -> dict[str, float]:
    """Each present stratum's mean calibrated mismatch probability (its predicted share)."""
    p = np.clip(np.nan_to_num(np.asarray(probability, dtype=np.float64), nan=0.0), 0.0, 1.0)
    return {name: float(p[strata == name].mean()) for name in STRATA if (strata == name).any()}


def predicted_variance(pairs: int, mean: float, answers: int) -> float:
    """The predicted variance of one stratum's mean after ``answers`` of its ``pairs`` were
    judged, were its share ``mean`` (``p̃(1 − p̃)(1 − n/N)/n`` with Agresti–Coull's
    ``p̃ = (n·mean + 1)/(n + 2)``, as :func:`~mispair.estimate.share.stratum_figures` takes it at
    the expected answers); infinite without answers, 0 once the stratum is judged whole."""
    if answers <= 0:
        return math.inf
    if answers >= pairs:
        return 0.0
    tilde = (answers * mean + 1) / (answers + 2)
    return tilde * (1 - tilde) * (1 - answers / pairs) / answers


def schedule(sizes: dict[str, int], means: dict[str, float]) -> np.ndarray:
    """``[Σ sizes]`` the stratum of each place of the sample order (the module's schedule), from
    each stratum's size and mean probability; the cut's share raised to :data:`CUT_SHARE` until it
    holds :data:`CUT_CHECK` answers. It depends on the sizes and means alone (not on the seed), so
    it is drawn once per design."""
    names = tuple(name for name in STRATA if sizes.get(name, 0) > 0)
    plan = _schedule(tuple(sizes[n] for n in names), tuple(means[n] for n in names), names[:1] == ("cut",))
    return np.array([names[k] for k in plan], dtype=object)


@functools.lru_cache(maxsize=16)
def _schedule(sizes: tuple[int, ...], means: tuple[float, ...], has_cut: bool) -> tuple[int, ...]:
    """:func:`schedule` as stratum indices: each stratum's gain (``W_h²`` times the drop of its
    :func:`predicted_variance` from its next answer) kept up to date for the stratum chosen only
    (a few strata, up to millions of places)."""
    total = sum(sizes)
    weight2 = [(size / total) ** 2 for size in sizes]
    placed = [0] * len(sizes)

    def gain(k: int) -> float:
        if placed[k] >= sizes[k]:
            return -math.inf
        now, then = (predicted_variance(sizes[k], means[k], placed[k] + d) for d in (0, 1))
        return math.inf if now == math.inf else weight2[k] * (now - then)

    gains = [gain(k) for k in range(len(sizes))]
    check = min(CUT_CHECK, sizes[0]) if has_cut else 0
    out = []
    for t in range(total):
        if placed[0] < check and placed[0] < CUT_SHARE * (t + 1):
            best = 0
        else:
            best = max(range(len(sizes)), key=gains.__getitem__)  # the first of equal gains
        placed[best] += 1
        gains[best] = gain(best)
        out.append(best)
    return tuple(out)


def stratified_order(
    pair_ids: list[str], strata: np.ndarray, means: dict[str, float], rng: np.random.Generator
) -> np.ndarray:
    """``[N]`` positions into ``pair_ids`` in sample order: the :func:`schedule` of the strata,
    each filled from a uniformly random order of its own pairs (drawn stratum by stratum, in
    :data:`STRATA`'s order, from ``rng``)."""
    queues = {}
    for name in STRATA:
        members = np.flatnonzero(strata == name)
        if len(members):
            queues[name] = list(members[rng.permutation(len(members))])
    plan = schedule({name: len(q) for name, q in queues.items()}, means)
    cursor = dict.fromkeys(queues, 0)
    order = np.empty(len(pair_ids), dtype=np.int64)
    for t, name in enumerate(plan):
        order[t] = queues[name][cursor[name]]
        cursor[name] += 1
    return order

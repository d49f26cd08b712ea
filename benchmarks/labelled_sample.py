"""Do a person's answers make the audit's numbers true? An honest reviewer (answers from the
truth) judges the first n pairs of random orders of the calibration collections, whose held-out
scores are committed (``results/calibration/scores/*.npz``, :mod:`audit_calibration`), and the
estimate of :mod:`mispair.estimate` is held against the truth. No training: every number here
comes from the committed scores in a few minutes.

For each collection (Tux Paint, OpenClipart, both icon themes, the synthetic set, the near-miss
Tux Paint set; clean and 15–70% where they exist; every committed score file), each reviewer
judges the audit's stratified order (:mod:`mispair.estimate.design`, drawn from its own seed):

- the share: whether the anytime interval holds the truth at n = 50, 100, 200, 300 and at every n
  at once, its width beside its fixed-n width, and the answers until it is within ± 3 points,
  against the plain uniform order's PPI interval of wave 5 on the same scores;
- the proven drop at 100 answers and ``--fdr 0.1`` (:func:`mispair.estimate.selection.proven_cut`):
  its realized false-discovery proportion, the mismatched pairs it finds and how many of its pairs
  nobody judged (against the conformal rule it replaces), whether ``fdr_interval`` and
  ``kept_mismatched_share_interval`` hold the realized values;
- the stopping rules: reviewers who stop at the first answer where the interval's width is at most
  0.10, or 0.06 (± 3 points): the share whose interval holds the truth.

    python benchmarks/labelled_sample.py > benchmarks/results/labelled_sample.md
    python benchmarks/labelled_sample.py --reviewers 20 --stoppers 20   # a quick look
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
SCORES = HERE / "results" / "calibration" / "scores"
COLLECTIONS = ("tuxpaint", "tuxpaint_near", "openclipart", "icons", "icons_symbolic", "synthetic")
SEEDS = (0, 1, 2)
SIZES = (50, 100, 200, 300)
FDR = 0.1
DROP_AT = 100
"""The answers at which the proven drop is measured."""
STOP_WIDTHS = (0.10, 0.06)
"""The widths at which the stopping reviewers stop (± 5 and ± 3 points)."""


@dataclass(eq=False)
class Scored:
    """One collection's committed scores: every pair's calibrated ``probability``, the audit's
    ``suspected`` set at q ≤ 0.1, the tie-broken ``suspicion`` and the ``truth``."""

    name: str
    claimed_auc: float  # what the scores alone say of the ranking (the decoys' separation)
    probability: np.ndarray
    suspicion: np.ndarray
    suspected: np.ndarray
    truth: np.ndarray


def load(path: Path) -> Scored:
    from mispair.division.calibration import Stratum, calibrate

    saved = np.load(path)
    strata = [Stratum(saved["score"], saved["null"]), Stratum(saved["others"], saved["null_others"])]
    found = calibrate(strata)
    p = found.mismatch_probability
    score = np.concatenate([saved["score"], saved["others"]])
    order = np.lexsort((-score, p))  # ascending suspicion: probability, then a lower score
    suspicion = np.empty(len(p))
    suspicion[order] = np.arange(len(p))
    truth = np.concatenate([saved["truth"], saved["truth_others"]]).astype(float)
    return Scored(path.stem, found.separation_auc, p, suspicion, found.suspected(FDR), truth)


@functools.lru_cache(maxsize=8)
def boundaries(most: int) -> np.ndarray:
    """``[most]`` :func:`mispair.estimate.share.boundary` at 1 … ``most`` answers."""
    from mispair.estimate.share import boundary

    return np.array([boundary(k) for k in range(1, most + 1)])


def prefix_intervals(answers: np.ndarray, predicted: np.ndarray, mean_predicted: float, power: bool):
    """The anytime interval (share, low, high, and its half-width before clipping) after each of
    the first ``len(answers)`` answers at once: the same formulas as
    :func:`mispair.estimate.share.anytime_share` from running sums (tested equal there, at every
    n, on a random case)."""
    y, f = answers.astype(float), predicted.astype(float) if power else np.zeros(len(answers))
    n = np.arange(1, len(y) + 1, dtype=float)
    fbar = mean_predicted if power else 0.0
    sy, sf = np.cumsum(y) + 1.0, np.cumsum(f) + 2 * fbar
    syy, sff, syf = np.cumsum(y * y) + 1.0, np.cumsum(f * f) + 2 * fbar**2, np.cumsum(y * f) + fbar
    m = n + 2
    cyy, cff, cyf = syy - sy * sy / m, sff - sf * sf / m, syf - sy * sf / m
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(cff > 0, np.clip(cyf / cff, 0, 1), 0.0) if power else np.zeros(len(y))
    variance = np.maximum((cyy - 2 * lam * cyf + lam * lam * cff) / (m - 1), 0)
    share = lam * fbar + (np.cumsum(y) - lam * np.cumsum(f)) / n
    half = np.sqrt(variance) * boundaries(len(y))
    return share, np.maximum(share - half, 0), np.minimum(share + half, 1), half


def stratified_prefixes(y: np.ndarray, f: np.ndarray, strata: np.ndarray, look: int):
    """The design's anytime interval (low, high, half-width) after each of the first ``len(y)``
    answers of a stratified order at once (``f``, ``strata``: every pair in sample order): the
    formulas of :func:`mispair.estimate.share.stratified_share` from running sums (tested equal
    there, at every n, on a random case)."""
    from mispair.estimate.share import ALPHA, LOOK_ALPHA, Z_LOOK, boundary

    top, big = len(y), len(f)
    names = list(dict.fromkeys(strata.tolist()))
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, big + 1))])
    seen, unseen, variance, fixed = np.zeros(top), np.zeros(top), np.zeros(top), np.zeros(top)
    for name in names:
        inside = strata == name
        pairs, weight = int(inside.sum()), inside.mean()
        count = np.cumsum(inside[:top])
        total = np.cumsum(np.where(inside[:top], y, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(count > 0, total / np.maximum(count, 1), 0.0)
            tilde = (total + 1) / (count + 2)
            spread = tilde * (1 - tilde)
            kappa = count / (pairs * (harmonic[pairs] - harmonic[pairs - count]))
            sampled = (count > 0) & (count < pairs)
            variance += np.where(sampled, weight**2 * kappa**2 * spread / np.maximum(count, 1), 0.0)
            fixed += np.where(sampled, weight**2 * (1 - count / pairs) * spread / np.maximum(count, 1), 0.0)
        seen += np.where(count > 0, weight * mean, 0.0)
        unseen += np.where(count > 0, 0.0, weight)
    n = np.arange(1, top + 1)
    curve = np.array([boundary(k, ALPHA - LOOK_ALPHA) for k in n])
    half = np.sqrt(variance * n) * curve
    low, high = seen - half, seen + unseen + half
    if look <= top:
        k = look - 1
        then = Z_LOOK * np.sqrt(fixed[k])
        after = n >= look
        low = np.where(after, np.maximum(low, seen[k] - then), low)
        high = np.where(after, np.minimum(high, seen[k] + unseen[k] + then), high)
    return np.maximum(low, 0), np.minimum(high, 1), (high - low) / 2, fixed


def stratified_estimates(y: np.ndarray, f: np.ndarray, strata: np.ndarray) -> np.ndarray:
    """``[len(y)]`` the design's estimate ``Σ_h W_h m̂_h`` after each of the first ``len(y)``
    answers (a stratum without answers at its mean probability), as
    :func:`mispair.estimate.share.stratified_share` gives it (tested equal at every n)."""
    top, estimate = len(y), np.zeros(len(y))
    for name in dict.fromkeys(strata.tolist()):
        inside = strata == name
        count = np.cumsum(inside[:top])
        total = np.cumsum(np.where(inside[:top], y, 0.0))
        prior = f[inside].mean()
        estimate += inside.mean() * np.where(count > 0, total / np.maximum(count, 1), prior)
    return estimate


def reviewer(scored: Scored, seed: int, sizes: tuple[int, ...]) -> dict[str, list[float]]:
    """One honest reviewer's figures at each answer count of ``sizes``, on the design's order
    drawn from ``seed``; beside them, the plain uniform order's PPI interval (the design before)."""
    from mispair.estimate.sample import sample_order
    from mispair.estimate.selection import proven_cut
    from mispair.estimate.share import Z_975, planned_look

    truth, p = scored.truth, scored.probability
    share, big = truth.mean(), len(truth)
    sample = sample_order([str(i) for i in range(big)], seed, p, scored.suspected)
    at, strata = sample["pair_id"].astype(int).to_numpy(), sample["stratum"].to_numpy()
    look = planned_look(p[at], strata)
    low, high, half, fixed = stratified_prefixes(truth[at], p[at], strata, look)
    estimate = stratified_estimates(truth[at], p[at], strata)
    uniform = np.random.default_rng(seed).permutation(big)
    before = prefix_intervals(truth[uniform], p[uniform], float(p.mean()), True)
    within = np.flatnonzero(half <= 0.03)
    within_before = np.flatnonzero(before[3] <= 0.03)
    out: dict[str, list[float]] = {
        "look": [float(look)],
        "three_points": [float(within[0] + 1) if len(within) else float("nan")],
        "three_points_before": [float(within_before[0] + 1) if len(within_before) else float("nan")],
        # at every n before the last (every pair judged: the exact share, sample_share's _exact)
        "covered_all": [float(np.all((low[:-1] <= share + 1e-12) & (share - 1e-12 <= high[:-1])))],
    }
    in_cut = np.zeros(big, dtype=bool)
    in_cut[at[strata == "cut"]] = True
    for n in sizes:
        if n > big:
            continue
        k = n - 1
        row = {
            "covered": float(low[k] <= share <= high[k]),
            "error": float(estimate[k] - share),
            "covered_before": float(before[1][k] <= share <= before[2][k]),
            "width": high[k] - low[k],
            "width_before": before[2][k] - before[1][k],
            "width_fixed": 2 * Z_975 * np.sqrt(fixed[k]),
        }
        if n == DROP_AT:
            row.update(drop_figures(scored, at[:n], in_cut, (low[k], high[k]), proven_cut))
        for key, value in row.items():
            out.setdefault(f"{key}@{n}", []).append(value)
    return out


def drop_figures(scored: Scored, judged: np.ndarray, in_cut: np.ndarray, share_interval, proven_cut):
    """The proven drop at ``--fdr`` :data:`FDR` after the answers to the pairs ``judged``: its
    realized false-discovery proportion, the share of the mismatched pairs it finds and of its
    pairs nobody judged, whether its ``fdr_interval`` and the kept set's interval hold the
    realized values, the share of the collection it drops; the conformal rule it replaces
    beside it."""
    from mispair.estimate.selection import conformal_selection

    truth = scored.truth
    answers = np.full(len(truth), np.nan)
    answers[judged] = truth[judged]
    cut = proven_cut(scored.suspicion, answers, in_cut, FDR)
    dropped = cut.dropped
    fdp = float(1 - truth[dropped].mean()) if dropped.any() else 0.0
    low, high = cut.fdr_interval
    kept = ~dropped
    kept_share = float(truth[kept].mean()) if kept.any() else 0.0
    left = lambda s, c: (s * len(truth) - dropped.sum() + c) / max(kept.sum(), 1)  # noqa: E731
    kept_low = max(left(share_interval[0], cut.correct_low), 0.0)
    kept_high = min(left(share_interval[1], cut.correct_high), 1.0)
    old = conformal_selection(scored.suspicion, answers, FDR).suspected
    return {
        "fdp": fdp,
        "fdp_ok": float(fdp <= FDR),
        "found": float(truth[dropped].sum() / truth.sum()) if truth.sum() else float("nan"),
        "unjudged": float((dropped & np.isnan(answers)).sum() / max(dropped.sum(), 1)),
        "fdr_held": float(low - 1e-12 <= fdp <= high + 1e-12) if cut.size else 1.0,
        "kept_held": float(kept_low - 1e-12 <= kept_share <= kept_high + 1e-12),
        "dropped": float(dropped.mean()),
        "proven": float(cut.size > 0),
        "found_before": float(truth[old].sum() / truth.sum()) if truth.sum() else float("nan"),
        "unjudged_before": float((old & np.isnan(answers)).sum() / max(old.sum(), 1)),
    }


def stoppers(scored: Scored, count: int, seed: int, width: float) -> tuple[float, float]:
    """``count`` reviewers on the design's orders who stop at the first answer with an interval
    of width at most ``width`` (or with every pair judged): the share whose interval held the
    truth, and the mean answers at stopping."""
    from mispair.estimate.sample import sample_order
    from mispair.estimate.share import planned_look

    truth, p = scored.truth, scored.probability
    ids = [str(i) for i in range(len(truth))]
    held, answered = 0, []
    for r in range(count):
        sample = sample_order(ids, seed * 100_000 + r, p, scored.suspected)
        at, strata = sample["pair_id"].astype(int).to_numpy(), sample["stratum"].to_numpy()
        low, high, _, _ = stratified_prefixes(truth[at], p[at], strata, planned_look(p[at], strata))
        tight = np.flatnonzero(high - low <= width)
        k = int(tight[0]) if len(tight) else len(truth) - 1
        held += bool(low[k] <= truth.mean() <= high[k]) or k == len(truth) - 1
        answered.append(k + 1)
    return held / count, float(np.mean(answered))


def _nanmean(values) -> float:
    """The mean of the values that are numbers (NaN where none is: a clean collection's AUC)."""
    values = np.asarray(values, dtype=float)
    return float(values[~np.isnan(values)].mean()) if (~np.isnan(values)).any() else float("nan")


def _auc(p: np.ndarray, truth: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(truth, p)) if 0 < truth.sum() < len(truth) else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reviewers", type=int, default=300, help="sample orders per score file")
    parser.add_argument("--stoppers", type=int, default=300, help="reviewers of each stopping rule")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.time()
    paths = [
        SCORES / f"{c}_r{r}_s{s}.npz"
        for c in COLLECTIONS
        for r in ("0", "0.15", "0.2", "0.25", "0.3", "0.4", "0.5", "0.7")
        for s in (*SEEDS, 10, 11)
    ]
    paths = [p for p in paths if p.is_file()]
    rows, stops = {}, {}
    for k, path in enumerate(paths):
        scored = load(path)
        figures: dict[str, list[float]] = {}
        for r in range(args.reviewers):
            for key, values in reviewer(scored, args.seed * 1_000_003 + k * 10_007 + r, SIZES).items():
                figures.setdefault(key, []).extend(values)
        rows[scored] = figures
        stops[scored.name] = [stoppers(scored, args.stoppers, args.seed * 1000 + k, w) for w in STOP_WIDTHS]
        print(f"{scored.name}: {time.time() - started:.0f} s", file=sys.stderr, flush=True)
    print(report(rows, stops, args))
    return 0


def report(rows: dict[Scored, dict[str, list[float]]], stops, args) -> str:
    def mean(name: str, members: list[Scored], n: int | None = None) -> float:
        key = name if n is None else f"{name}@{n}"
        return _nanmean(np.concatenate([rows[s].get(key, []) for s in members]))

    groups: dict[str, list[Scored]] = {}
    for scored in rows:
        groups.setdefault(scored.name.rsplit("_s", 1)[0], []).append(scored)
    lines = [
        f"# A person's answers against the truth ({args.reviewers} honest reviewers per score file, "
        f"seed {args.seed}; `python benchmarks/labelled_sample.py`)",
        "",
        "The design (sample.csv stratified by the audit's probabilities, the cut checked first) against "
        "the plain uniform order of wave 5 (PPI's anytime interval), on the same committed scores. Per "
        "collection and rate (pooled over its score files): the true share and AUC; the planned look; the "
        "median answers until the interval is within ± 3 points (design / before); at n answers the share "
        "of reviewers whose interval held the truth (design / before), the widths (design, its fixed-n "
        "width, before) and the design's mean estimate less the truth (its bias, with the Monte Carlo "
        "standard error of that mean).",
        "",
        "| collection | truly mismatched | AUC | look | ± 3 points at (before) | n | holds (before) "
        "| width | fixed-n width | width before | mean error (± se) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, members in groups.items():
        truth = np.mean([s.truth.mean() for s in members])
        auc = _nanmean([_auc(s.probability, s.truth) for s in members])
        three = np.concatenate([rows[s]["three_points"] for s in members])
        before = np.concatenate([rows[s]["three_points_before"] for s in members])
        for n in SIZES:
            if not len(np.concatenate([rows[s].get(f"covered@{n}", []) for s in members])):
                continue
            lines.append(
                f"| {name} | {truth:.3f} | {auc:.3f} | {mean('look', members):.0f} | "
                f"{_median(three)} ({_median(before)}) | {n} | {mean('covered', members, n):.3f} "
                f"({mean('covered_before', members, n):.3f}) | {mean('width', members, n):.3f} | "
                f"{mean('width_fixed', members, n):.3f} | {mean('width_before', members, n):.3f} | "
                f"{_mean_error(rows, members, n)} |"
            )
    every = np.concatenate([rows[s]["covered_all"] for s in rows])
    lines += [
        "",
        "Every reviewer's interval held the truth at every n at once (1 … N − 1; at N the share is "
        "known) in "
        f"{every.mean():.3f} of {len(every)} reviewer-runs.",
        "",
        f"## The proven drop at {DROP_AT} answers, --fdr {FDR}",
        "",
        "Per collection: the share of reviewer-runs whose drop's realized false-discovery proportion is "
        f"at most {FDR} and its mean; the share of all mismatched pairs it finds and the share of its pairs "
        "nobody judged (beside them, the conformal rule it replaces); how often `fdr_interval` and "
        "`kept_mismatched_share_interval` held the realized values; the share of runs with a proven cut; "
        "the share of the collection dropped.",
        "",
        "| collection | AUC | FDP ≤ q | mean FDP | found (before) | unjudged (before) | fdr_interval holds "
        "| kept interval holds | proven | dropped |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, members in groups.items():
        auc = _nanmean([_auc(s.probability, s.truth) for s in members])
        n = DROP_AT
        lines.append(
            f"| {name} | {auc:.3f} | {mean('fdp_ok', members, n):.3f} | {mean('fdp', members, n):.3f} | "
            f"{mean('found', members, n):.2f} ({mean('found_before', members, n):.2f}) | "
            f"{mean('unjudged', members, n):.2f} ({mean('unjudged_before', members, n):.2f}) | "
            f"{mean('fdr_held', members, n):.3f} | {mean('kept_held', members, n):.3f} | "
            f"{mean('proven', members, n):.2f} | {mean('dropped', members, n):.3f} |"
        )
    lines += [
        "",
        f"## Stopping when the interval is tight ({args.stoppers} reviewers each, on the design's orders)",
        "",
        "| score file | " + " | ".join(f"width ≤ {w}: holds, mean answers" for w in STOP_WIDTHS) + " |",
        "|---|" + "---|" * len(STOP_WIDTHS),
    ]
    held = []
    for name, results in stops.items():
        held.extend(share for share, _ in results)
        lines.append(f"| {name} | " + " | ".join(f"{s:.3f}, {a:.0f}" for s, a in results) + " |")
    lines += [
        "",
        f"Least coverage over the score files and rules: {min(held):.3f}; mean {np.mean(held):.3f}.",
    ]
    return "\n".join(lines)


def _mean_error(rows, members, n: int) -> str:
    """The mean of the reviewers' estimate less the truth at ``n`` answers, ± its standard error."""
    errors = np.concatenate([rows[s].get(f"error@{n}", []) for s in members])
    se = errors.std(ddof=1) / np.sqrt(len(errors)) if len(errors) > 1 else float("nan")
    return f"{errors.mean():+.4f} (± {se:.4f})"


def _median(values) -> str:
    values = np.asarray(values, dtype=float)
    return "never" if np.isnan(values).all() else f"{np.nanmedian(values):.0f}"


if __name__ == "__main__":
    sys.exit(main())

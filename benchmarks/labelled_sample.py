"""Do a person's answers make the audit's numbers true? An honest reviewer (answers from the
truth) judges the first n pairs of random orders of the calibration collections, whose held-out
scores are committed (``results/calibration/scores/*.npz``, :mod:`audit_calibration`), and the
estimate of :mod:`mispair.estimate` is held against the truth. No training: every number here
comes from the committed scores in a few minutes.

For each collection (Tux Paint, OpenClipart, both icon themes, the synthetic set, the near-miss
Tux Paint set; clean and 20/40/70% where they exist; 3 seeds) and each n in 50, 100, 200:

- coverage: the share of reviewers whose anytime interval holds the true share (PPI and
  labels-only), and the mean widths (PPI's relative to the labels-only one);
- the labelled drop at ``--fdr 0.1`` (conformal selection against the pairs judged correct):
  its realized false-discovery rate, the share of mismatched pairs it finds, against the
  score-only drop's realized rate (the audit's ``suspected``);
- the ranking's AUC on the answers: how often its interval holds the true AUC.

Then the stopping rule: 1,000 reviewers per collection (orders redrawn from the seed) who stop at
the first answer where the interval's width is at most 0.10 (or when every pair is judged): the
share whose interval holds the truth.

    python benchmarks/labelled_sample.py > benchmarks/results/labelled_sample.md
    python benchmarks/labelled_sample.py --reviewers 20 --stoppers 100   # a quick look
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
SIZES = (50, 100, 200)
FDR = 0.1
STOP_WIDTH = 0.10


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


def reviewer(scored: Scored, rng: np.random.Generator, sizes: tuple[int, ...]) -> dict[str, list[float]]:
    """One honest reviewer's figures at each answer count of ``sizes``."""
    from mispair.estimate.selection import conformal_selection
    from mispair.estimate.trust import ranking_auc

    order = rng.permutation(len(scored.truth))
    truth, p = scored.truth, scored.probability
    share = truth.mean()
    top = min(max(sizes), len(order))
    y, f = truth[order[:top]], p[order[:top]]
    ppi = prefix_intervals(y, f, float(p.mean()), True)
    alone = prefix_intervals(y, f, float(p.mean()), False)
    out: dict[str, list[float]] = {}
    true_auc = _auc(p, truth)
    for n in sizes:
        if n > len(order):
            continue
        k = n - 1
        answers = np.full(len(truth), np.nan)
        answers[order[:n]] = truth[order[:n]]
        chosen = conformal_selection(scored.suspicion, answers, FDR).suspected
        unjudged = np.isnan(answers)
        picked = chosen & unjudged
        auc = ranking_auc(f[:n], y[:n] == 1)
        row = {
            "covered": float(ppi[1][k] <= share <= ppi[2][k]),
            "covered_alone": float(alone[1][k] <= share <= alone[2][k]),
            "width": ppi[2][k] - ppi[1][k],
            "width_alone": alone[2][k] - alone[1][k],
            "wider": float(ppi[3][k] > alone[3][k] + 1e-12),  # its half-width, before clipping to [0, 1]
            "wider_clipped": float(ppi[2][k] - ppi[1][k] > alone[2][k] - alone[1][k] + 1e-12),
            "fdp": float(1 - truth[chosen].mean()) if chosen.any() else 0.0,
            "fdp_unjudged": float(1 - truth[picked].mean()) if picked.any() else 0.0,
            "found": float(truth[chosen].sum() / truth.sum()) if truth.sum() else float("nan"),
            "auc_covered": float(auc.low <= true_auc <= auc.high)
            if auc and true_auc == true_auc
            else float("nan"),
        }
        for key, value in row.items():
            out.setdefault(f"{key}@{n}", []).append(value)
    return out


def stoppers(scored: Scored, count: int, seed: int) -> tuple[float, float]:
    """``count`` reviewers who stop at the first answer with an interval of width at most
    :data:`STOP_WIDTH` (or with every pair judged): the share whose interval held the truth, and
    the mean answers at stopping."""
    rng = np.random.default_rng(seed)
    truth, p = scored.truth, scored.probability
    held, answered = 0, []
    for _ in range(count):
        order = rng.permutation(len(truth))
        _, low, high, _ = prefix_intervals(truth[order], p[order], float(p.mean()), True)
        tight = np.flatnonzero(high - low <= STOP_WIDTH)
        k = int(tight[0]) if len(tight) else len(truth) - 1
        if k == len(truth) - 1:  # every pair judged: the share is known
            held += 1
        else:
            held += bool(low[k] <= truth.mean() <= high[k])
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
    parser.add_argument("--reviewers", type=int, default=100, help="random orders per collection")
    parser.add_argument("--stoppers", type=int, default=1000, help="reviewers of the stopping rule")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.time()
    paths = [
        SCORES / f"{c}_r{r}_s{s}.npz"
        for c in COLLECTIONS
        for r in ("0", "0.2", "0.25", "0.4", "0.7")
        for s in SEEDS
    ]
    paths = [p for p in paths if p.is_file()]
    rows, stops = {}, {}
    for k, path in enumerate(paths):
        scored = load(path)
        rng = np.random.default_rng([args.seed, k])
        figures: dict[str, list[float]] = {}
        for _ in range(args.reviewers):
            for key, values in reviewer(scored, rng, SIZES).items():
                figures.setdefault(key, []).extend(values)
        rows[scored] = figures
        stops[scored.name] = stoppers(scored, args.stoppers, args.seed * 1000 + k)
        print(f"{scored.name}: {time.time() - started:.0f} s", file=sys.stderr, flush=True)
    print(report(rows, stops, args))
    return 0


def _pooled(rows: dict[Scored, dict[str, list[float]]], members: list[Scored], n: int):
    """A figure at ``n`` answers pooled over the seeds of a collection."""
    return lambda name: np.concatenate([rows[s].get(f"{name}@{n}", []) for s in members])


def report(rows: dict[Scored, dict[str, list[float]]], stops: dict[str, tuple[float, float]], args) -> str:
    lines = [
        f"# A person's answers against the truth ({args.reviewers} honest reviewers per collection, "
        f"seed {args.seed}; `python benchmarks/labelled_sample.py`)",
        "",
        "Per collection and rate (3 seeds of scores each): the true share; at n answers, the share of "
        "reviewers whose anytime 95% interval held the truth (PPI / labels only), PPI's mean width "
        "(high − low) and its ratio to the labels-only one's, the realized false-discovery rate of "
        "the labelled drop at --fdr 0.1 (mean over reviewers and seeds; the score-only drop's beside "
        "it) and the share of the mismatched pairs it finds, and how often the AUC's interval on the "
        "answers held the true AUC (beside the true AUC, in brackets, the AUC the scores alone claim: "
        "the decoys' estimate the report shows).",
        "",
        "| collection | truly mismatched | AUC (claimed by the scores) | n | interval holds (PPI / labels) "
        "| PPI width | PPI width / labels width | labelled drop FDR (score-only) | found "
        "| AUC interval holds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[str, list[Scored]] = {}
    for scored in rows:
        groups.setdefault(scored.name.rsplit("_s", 1)[0], []).append(scored)
    covered_all, covered_n, wider, clipped = [], 0, [], []
    for name, members in groups.items():
        truth = np.mean([s.truth.mean() for s in members])
        auc = _nanmean([_auc(s.probability, s.truth) for s in members])
        claimed = np.mean([s.claimed_auc for s in members])
        score_only = np.mean([1 - s.truth[s.suspected].mean() if s.suspected.any() else 0.0 for s in members])
        for n in SIZES:
            key = _pooled(rows, members, n)
            if not len(key("covered")):
                continue
            covered_all.extend(key("covered"))
            wider.extend(key("wider"))
            clipped.extend(key("wider_clipped"))
            covered_n += len(key("covered"))
            ratio = np.mean(key("width")) / np.mean(key("width_alone"))
            lines.append(
                f"| {name} | {truth:.3f} | {auc:.3f} ({claimed:.3f}) | {n} | {np.mean(key('covered')):.3f} / "
                f"{np.mean(key('covered_alone')):.3f} | {np.mean(key('width')):.3f} | {ratio:.2f} "
                f"| {np.mean(key('fdp')):.3f} "
                f"({score_only:.3f}) | {_nanmean(key('found')):.2f} | {_nanmean(key('auc_covered')):.2f} |"
            )
    lines += [
        "",
        f"Every run: the PPI interval held the truth in {np.mean(covered_all):.3f} of {covered_n} "
        f"reviewer-runs; its half-width was larger than the labels-only one's in {int(np.sum(wider))} "
        f"of them (once clipped to [0, 1], it reached wider in {int(np.sum(clipped))}: at a share near 0 "
        "its centre moves off the labels-only one's 0, on the clean collections).",
        "",
        f"## Stopping when the interval is tight ({args.stoppers} reviewers each, stop at width ≤ "
        f"{STOP_WIDTH})",
        "",
        "| collection | interval holds | mean answers at stopping |",
        "|---|---|---|",
    ]
    held = []
    for name, (share, answered) in stops.items():
        held.append(share)
        lines.append(f"| {name} | {share:.3f} | {answered:.0f} |")
    lines += ["", f"Least coverage over the collections: {min(held):.3f}; mean {np.mean(held):.3f}."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

"""The spread of an audit's verdicts over seeds (``mispair audit --reseeds K``).

The held-out scorers, the decoys and the final run are drawn from ``train.seed``; on a collection
the scores rank only fairly (icons: AUC about 0.82), the pairs near the cut change sides from one
seed to another (benchmarks/results/same_pairs.md: two audits' suspects overlap 0.43–0.57 on 400
icons). ``--reseeds K`` trains the audit's run ``K − 1`` more times with the seeds after
``train.seed``, each in ``AUDIT/reseeds/seed-<k>`` (resumable like the audit's own run), and says
in how many of the ``K`` audits each pair is suspected (``pairs.csv``'s ``suspected_in_reseeds``)
and how far the share and the suspects moved (:class:`~mispair.audit.summary.ReseedSpread`). The
audit's own numbers are its seed's, unchanged; the cost is ``K`` times the training."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mispair.audit.summary import ReseedSpread
from mispair.config import RunConfig, from_dict

RESEEDS_FOLDER = "reseeds"
"""The audit's sub-folder of the reseeded runs."""
MAX_RESEEDS = 10
"""The most audits ``--reseeds`` asks for."""


@dataclass(frozen=True)
class ReseedVerdict:
    """One reseeded audit's verdicts: its pairs' ``pair_id [n]``, whether each is ``suspected
    [n]``, and its estimated mismatched ``share`` (None without decoys)."""

    pair_id: np.ndarray
    suspected: np.ndarray
    share: float | None


def reseeded_config(config: RunConfig, out: Path, k: int) -> RunConfig:
    """``config`` with ``train.seed`` moved on by ``k``, trained in ``out/reseeds/seed-<k>``."""
    again = from_dict(config.to_dict())
    again.train.seed = config.train.seed + k
    again.output = str(out / RESEEDS_FOLDER / f"seed-{k}")
    return again


def reseed_spread(own: ReseedVerdict, others: list[ReseedVerdict]) -> tuple[np.ndarray, ReseedSpread]:
    """``[n]`` in how many of the audits (``own`` and ``others``) each of ``own``'s pairs is
    suspected, and the spread's summary. A pair another audit did not score counts as not
    suspected there."""
    audits = [own, *others]
    sets = [set(np.asarray(a.pair_id)[np.asarray(a.suspected, dtype=bool)].tolist()) for a in audits]
    counts = np.zeros(len(own.pair_id), dtype=np.int64)
    for suspects in sets:
        counts += np.fromiter((p in suspects for p in list(own.pair_id)), dtype=bool, count=len(counts))
    overlaps = [_jaccard(a, b) for a, b in itertools.combinations(sets, 2)]
    mine = counts[np.asarray(own.suspected, dtype=bool)]
    spread = ReseedSpread(
        audits=len(audits),
        shares=[a.share for a in audits],
        suspects=[len(s) for s in sets],
        suspected_in_all=int((mine == len(audits)).sum()),
        suspected_in_most=int((mine > len(audits) / 2).sum()),
        jaccard_mean=round(float(np.mean(overlaps)), 4) if overlaps else 1.0,
        jaccard_min=round(float(np.min(overlaps)), 4) if overlaps else 1.0,
    )
    return counts, spread


def _jaccard(a: set[str], b: set[str]) -> float:
    """``|a ∩ b| / |a ∪ b|`` (1 for two empty sets: they agree)."""
    return len(a & b) / len(a | b) if a | b else 1.0

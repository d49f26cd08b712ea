"""Held-out division scores: what a run's division fits its mixture to, kept in the run's folder.

A pair's held-out score comes from models that never trained on it (out-of-fold or early-epoch
scorers, trained in :mod:`mispair.engine.pair_scores`); higher means more likely matched. This
module holds the scores as data, reads and writes them (``pair_scores.npz``), turns them into a
clean probability and a clean/noisy split at the division's threshold, and logs a division
against the true noise, for every recipe and the audit alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mispair.atomic import atomic_write
from mispair.division.detection import detection_metrics
from mispair.division.gmm import fit_gmm
from mispair.division.mixtures import min_max_normalize
from mispair.safe_parse import read_npz

PAIR_SCORES_FILE = "pair_scores.npz"
"""A run's held-out scores, kept in its output folder."""


@dataclass(frozen=True)
class DivisionScores:
    """``train [n_train_pairs]``: the held-out scores of the training pairs; ``others
    [n_other_pairs]``: those of the pairs of the other splits (dev, test) when the division
    scores them too (``division.score_other_splits``), else None."""

    train: np.ndarray
    others: np.ndarray | None = None
    null: np.ndarray | None = None
    """``[m]`` the decoy pairs' scores, scored as the training pairs are
    (:mod:`mispair.engine.decoys`): the mismatched pairs' null; None where none were scored."""
    null_others: np.ndarray | None = None
    """``[m_others]`` the decoys of the other splits, scored as those are."""

    def save(self, path: Path, key: str) -> None:
        """Write the scores to ``path`` atomically, tagged with ``key`` (what they depend on)."""
        named = {"others": self.others, "null": self.null, "null_others": self.null_others}
        extra = {name: value for name, value in named.items() if value is not None}
        atomic_write(path, lambda handle: np.savez(handle, score=self.train, key=np.array(key), **extra))

    @classmethod
    def read(cls, path: Path, key: str | None = None) -> DivisionScores | None:
        """The scores kept in ``path``, or None when it has none (or, given ``key``, none made
        for it)."""
        if not path.is_file():
            return None
        if key is not None and str(read_npz(path, ("key",))["key"]) != key:
            return None
        saved = read_npz(path, ("score", "others", "null", "null_others"))  # damaged: one-line error
        return cls(saved["score"], saved.get("others"), saved.get("null"), saved.get("null_others"))


def mixture_clean_probability(score: np.ndarray) -> np.ndarray:
    """``[n_pairs]``: the posterior of the clean component of a two-component GMM over the
    min–max normalised scores (higher = cleaner; NCR's mixture, GSC's ``split_batch``)."""
    return fit_gmm(min_max_normalize(-np.asarray(score, dtype=np.float64))).clean_prob


def clean_split(score: np.ndarray, p_threshold: float = 0.5) -> np.ndarray:
    """``[n_pairs]`` bool: the pairs a two-component GMM over the held-out scores (higher =
    cleaner) puts on the clean side with probability above ``p_threshold``."""
    return mixture_clean_probability(score) > p_threshold


def division_log(
    clean_prob: np.ndarray, is_noisy: np.ndarray | None, p_threshold: float, prefix: str = "division"
) -> dict[str, float]:
    """The log values of a division: ``{prefix}/clean_fraction`` (clean probability above
    ``p_threshold``) and, when the true noise ``is_noisy [n_pairs]`` is known, its detection
    scores ``{prefix}/auc``, ``precision``, ``recall``, ``f1`` (:func:`detection_metrics`)."""
    values = {f"{prefix}/clean_fraction": float((clean_prob > p_threshold).mean())}
    if is_noisy is not None:
        scores = detection_metrics(clean_prob, is_noisy, threshold=p_threshold)
        values.update({f"{prefix}/{name}": v for name, v in scores.items()})
    return values

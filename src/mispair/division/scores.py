"""Held-out division scores: what a run's division fits its mixture to, kept in the run's folder.

A pair's held-out score comes from models that never trained on it (out-of-fold or early-epoch
scorers, trained in :mod:`mispair.engine.held_out`); higher means more likely matched. This
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
from mispair.division.mixtures import Division, min_max_normalize
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
    (:mod:`mispair.engine.held_out.decoys`): the mismatched pairs' null; None where none were scored."""
    null_others: np.ndarray | None = None
    """``[m_others]`` the decoys of the other splits, scored as those are."""
    judged: np.ndarray | None = None
    """``[n_train_pairs]`` a person's answers on the training pairs (``division.answers``: 1
    mismatched, 0 correct, NaN not judged or unsure), or None; never saved (each run reads them
    from its labels files, and the scores' key names them)."""

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


@dataclass(frozen=True)
class MixtureSettings:
    """The EM settings of the two-component GMM over held-out scores (:func:`held_out_mixture`):
    at most ``max_iter`` iterations, stopped when the lower bound gains less than ``tol``."""

    max_iter: int
    tol: float


TRAINING_MIXTURE = MixtureSettings(max_iter=10, tol=1e-2)
"""NCR's settings, which every training division keeps (``holdout``'s split, the refinement
rounds, ``--export-pairs``): a few EM steps, the published recipes' numbers (docs/results.md)."""

AUDIT_MIXTURE = MixtureSettings(max_iter=500, tol=1e-6)
"""EM run to convergence: the audit's fallback share and probabilities, which a person reads."""


def held_out_mixture(score: np.ndarray, settings: MixtureSettings = TRAINING_MIXTURE) -> Division:
    """The two-component GMM over held-out ``score [n_pairs]`` (higher = cleaner): fitted to the
    min–max normalised suspicion ``−score`` (NCR's mixture, GSC's ``split_batch``), the noisy
    component second; ``clean_prob`` the posterior of the clean component. The one place a
    mixture is fitted to held-out scores (the training divisions and the audit's fallback)."""
    suspicion = min_max_normalize(-np.asarray(score, dtype=np.float64))
    return fit_gmm(suspicion, max_iter=settings.max_iter, tol=settings.tol)


def mixture_clean_probability(score: np.ndarray, settings: MixtureSettings = TRAINING_MIXTURE) -> np.ndarray:
    """``[n_pairs]``: the clean probability of :func:`held_out_mixture`."""
    return held_out_mixture(score, settings).clean_prob


def clean_split(
    score: np.ndarray, p_threshold: float = 0.5, settings: MixtureSettings = TRAINING_MIXTURE
) -> np.ndarray:
    """``[n_pairs]`` bool: the pairs :func:`held_out_mixture` puts on the clean side with
    probability above ``p_threshold``."""
    return mixture_clean_probability(score, settings) > p_threshold


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

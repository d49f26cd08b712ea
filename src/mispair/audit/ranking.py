"""Every training pair of a trained run, ranked by suspicion, with a suggested fix."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.metrics import average_precision_score, precision_recall_curve, roc_auc_score, roc_curve

from mispair.data.batching import TrainingPairs
from mispair.division import Division, fit_gmm, min_max_normalize
from mispair.engine.trained import TrainedRun
from mispair.methods.scoring import cross_similarities
from mispair.progress import progress_bar


@dataclass
class BestMatches:
    """The collection's best match of each image and caption under a model (a suggested fix).

    ``caption [n_images]``/``caption_score``: each training image's most similar training
    caption and its similarity; ``image [n_captions]``/``image_score``: each caption's most
    similar image; ``pair_score [n_captions]``: each caption's similarity with its paired image.
    """

    caption: np.ndarray
    caption_score: np.ndarray
    image: np.ndarray
    image_score: np.ndarray
    pair_score: np.ndarray


def best_matches(run: TrainedRun, *, pairs: TrainingPairs | None = None, chunk: int = 1024,
                 progress: bool = False) -> BestMatches:  # fmt: skip
    """:class:`BestMatches` of ``pairs`` (default: the run's training pairs) under the run's models
    (averaged), reading the ``[n_images, n_captions]`` similarities ``chunk`` images at a time
    (memory: chunk × captions)."""
    train: TrainingPairs = run.train if pairs is None else pairs
    n_images, n_captions = train.pairs.n_images, len(train)
    captions = np.arange(n_captions)
    best_caption = np.zeros(n_images, dtype=np.int64)
    caption_score = np.zeros(n_images, dtype=np.float32)
    image_score = np.full(n_captions, -np.inf, dtype=np.float32)
    best_image = np.zeros(n_captions, dtype=np.int64)
    pair_score = np.zeros(n_captions, dtype=np.float32)
    starts = range(0, n_images, chunk)
    for start in progress_bar(starts, desc="suggestions", disable=not progress, leave=False):
        images = np.arange(start, min(start + chunk, n_images))
        batch_size = run.config.train.eval_batch_size
        sims = cross_similarities(run.models, train, images, captions, batch_size=batch_size,
                                  device=run.device).numpy()  # fmt: skip
        best_caption[images] = sims.argmax(axis=1)
        caption_score[images] = sims.max(axis=1)
        column_best = sims.max(axis=0)
        better = column_best > image_score
        best_image[better] = images[sims.argmax(axis=0)[better]]
        image_score[better] = column_best[better]
        mine = (train.image_of_caption >= start) & (train.image_of_caption < images[-1] + 1)
        pair_score[mine] = sims[train.image_of_caption[mine] - start, captions[mine]]
    return BestMatches(best_caption, caption_score, best_image, image_score, pair_score)


def suspicion_order(score: np.ndarray) -> np.ndarray:
    """``[n_pairs]`` pair indices from the most suspect (lowest held-out score) to the least;
    ties keep the collection's order."""
    return np.argsort(score, kind="stable")


def score_division(score: np.ndarray) -> Division:
    """The two-component GMM of the audit's held-out scores (what ``holdout`` fits), EM run to
    convergence (the mismatch probabilities and the share are what a user reads; NCR's 10
    iterations stop short): its ``params`` are on the min–max normalised suspicion ``−score``, the
    noisy component second."""
    return fit_gmm(min_max_normalize(-np.asarray(score, dtype=np.float64)), max_iter=500, tol=1e-6)


@dataclass
class DetectionCurves:
    """How well the ranking finds the known mismatched pairs (positives: mismatched).

    ``auc``: ROC-AUC of the suspicion; ``average_precision``; ``precision``/``recall`` of the
    suspected set (mismatch probability ≥ the threshold); ``roc`` (fpr, tpr) and ``pr`` (recall, precision)
    curves, thinned to at most 200 points for the report.
    """

    auc: float
    average_precision: float
    precision: float
    recall: float
    suspected: int
    mismatched: int
    pairs: int
    roc: tuple[list[float], list[float]]
    pr: tuple[list[float], list[float]]

    def summary(self) -> dict[str, float]:
        return {"auc": self.auc, "average_precision": self.average_precision, "precision": self.precision,
                "recall": self.recall, "suspected": self.suspected, "mismatched": self.mismatched,
                "pairs": self.pairs}  # fmt: skip


def detection_curves(score: np.ndarray, clean_prob: np.ndarray, is_noisy: np.ndarray, *,
                     threshold: float = 0.5) -> DetectionCurves:  # fmt: skip
    """Score the ranking (low ``score`` = suspect) and the suspected set (mismatch probability
    ``1 − clean_prob`` at least ``threshold``) against ``is_noisy [n_pairs]`` (True = truly
    mismatched; both classes must be present)."""
    suspicion = -np.asarray(score, dtype=np.float64)
    fpr, tpr, _ = roc_curve(is_noisy, suspicion)
    precision, recall, _ = precision_recall_curve(is_noisy, suspicion)
    suspected = 1.0 - clean_prob >= threshold
    hits = int((suspected & is_noisy).sum())
    return DetectionCurves(
        auc=float(roc_auc_score(is_noisy, suspicion)),
        average_precision=float(average_precision_score(is_noisy, suspicion)),
        precision=hits / max(int(suspected.sum()), 1),
        recall=hits / max(int(is_noisy.sum()), 1),
        suspected=int(suspected.sum()),
        mismatched=int(is_noisy.sum()),
        pairs=len(is_noisy),
        roc=_thin(fpr, tpr),
        pr=_thin(recall, precision),
    )


def _thin(x: np.ndarray, y: np.ndarray, points: int = 200) -> tuple[list[float], list[float]]:
    keep = np.unique(np.linspace(0, len(x) - 1, min(points, len(x))).round().astype(int))
    return x[keep].round(5).tolist(), y[keep].round(5).tolist()

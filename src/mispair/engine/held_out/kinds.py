"""What a held-out pair's score is (``division.pair_score``): a name → :class:`ScoreKindSpec`
table, :data:`SCORE_KINDS`, which the config check reads. A new score kind is one function here
(its scores of a fold's pairs and of their decoys) and one row of the table; a kind says what it
can do (``decoys``: whether a decoy pair can be scored as a real one) instead of being asked by
name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mispair.data import mapped
from mispair.data.batching import TrainingPairs
from mispair.data.pairset import PairSet
from mispair.division.gap import gap_corrected_similarity
from mispair.division.structure import structure_checked_probability
from mispair.encoding import encode_split, evaluating, pair_similarities
from mispair.engine.held_out.contrast import contrast_with_decoys
from mispair.engine.held_out.plan import ScoreKind
from mispair.nn.allpairs import all_pair_similarities
from mispair.nn.embedding import Fragments
from mispair.nn.model import RetrievalModel

NO_SCORES = np.zeros(0, dtype=np.float32)


@dataclass(frozen=True)
class KindSettings:
    """How a kind scores: the ``contrast`` temperature ``tau``, the encoding ``batch_size`` and
    ``device``."""

    tau: float = 0.05
    batch_size: int = 256
    device: torch.device | str = "cpu"


Scorer = Callable[[RetrievalModel, TrainingPairs, np.ndarray, KindSettings], tuple[np.ndarray, np.ndarray]]
"""``(model, pairs, decoys [m, 2], settings) -> ([len(pairs)], [m])``: the scores of a fold's
pairs and of its decoys (caption ``decoys[d, 0]`` shown with the picture of pair ``decoys[d, 1]``)."""


@dataclass(frozen=True)
class ScoreKindSpec:
    """A score kind: its ``score`` function and whether it scores ``decoys`` (the kinds whose
    score depends on structure over the whole fold, which a single re-paired caption does not
    have, score none)."""

    score: Scorer
    decoys: bool


def _similarity(
    model: RetrievalModel, pairs: TrainingPairs, decoys: np.ndarray, settings: KindSettings
) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's similarity; a decoy's, its caption's similarity with the picture it is shown with."""
    device = torch.device(settings.device)
    score = pair_similarities([model], pairs, settings.batch_size, device)
    if not len(decoys):
        return score, NO_SCORES
    shown = TrainingPairs(
        pairs.pairs, [pairs.tokens[c] for c in decoys[:, 0]], pairs.image_of_caption[decoys[:, 1]]
    )
    return score, pair_similarities([model], shown, settings.batch_size, device)


@dataclass(frozen=True)
class _Fold:
    """A fold's pairs encoded once: its images' and captions' sides, each pair's image ``paired``
    (an index into ``n_images``), and the pooled embeddings of each pair's two sides."""

    image_side: Fragments
    text_side: Fragments
    paired: np.ndarray
    n_images: int
    pair_images: Tensor
    pair_texts: Tensor


def _encoded(model: RetrievalModel, pairs: TrainingPairs, settings: KindSettings) -> _Fold:
    images, paired = np.unique(pairs.image_of_caption, return_inverse=True)
    fold = PairSet(mapped.rows(pairs.pairs.images, images), [""] * len(pairs), paired)
    image_side, text_side = encode_split(
        model, fold, pairs.tokens, batch_size=settings.batch_size, device=settings.device
    )
    pair_images, pair_texts = image_side.pooled[torch.from_numpy(paired)].cpu(), text_side.pooled.cpu()
    return _Fold(image_side, text_side, paired, len(images), pair_images, pair_texts)


def _contrast_of(
    model: RetrievalModel, fold: _Fold, decoys: np.ndarray, settings: KindSettings
) -> tuple[np.ndarray, np.ndarray]:
    def rows(start: int, stop: int) -> Tensor:  # one block of images against every caption
        block = all_pair_similarities(
            model.similarity, fold.image_side[start:stop], fold.text_side, device=settings.device
        )
        return block.float().cpu()

    shown = None
    if len(decoys):
        shown = torch.from_numpy(np.stack([decoys[:, 0], fold.paired[decoys[:, 1]]], axis=1))
    with evaluating(model):
        contrast = contrast_with_decoys(
            rows,
            fold.n_images,
            torch.from_numpy(fold.paired),
            settings.tau,
            chunk=settings.batch_size,
            decoys=shown,
        )
    return contrast.score.numpy(), contrast.decoys.numpy()


def _contrast(
    model: RetrievalModel, pairs: TrainingPairs, decoys: np.ndarray, settings: KindSettings
) -> tuple[np.ndarray, np.ndarray]:
    """The mean of the log-probabilities, at temperature ``tau``, of a pair's image among the
    fold's images given its caption and of its caption among their captions given its image
    (:func:`~mispair.engine.held_out.contrast.contrast_scores`); a decoy's from the same
    similarities, its caption's own picture left out of the images weighed against it and the
    picture's own captions out of the captions."""
    return _contrast_of(model, _encoded(model, pairs, settings), decoys, settings)


def _contrast_structure(
    model: RetrievalModel, pairs: TrainingPairs, decoys: np.ndarray, settings: KindSettings
) -> tuple[np.ndarray, np.ndarray]:
    """GSC's clean label: the lower of the mixture clean probabilities of a pair's ``contrast``
    score and of its structure consistency with the fold's pairs
    (:func:`~mispair.division.structure.structure_checked_probability`)."""
    fold = _encoded(model, pairs, settings)
    scores = _contrast_of(model, fold, decoys, settings)[0]
    checked = structure_checked_probability(fold.pair_images, fold.pair_texts, scores)
    return checked.astype(np.float32), NO_SCORES


def _gap_corrected(
    model: RetrievalModel, pairs: TrainingPairs, decoys: np.ndarray, settings: KindSettings
) -> tuple[np.ndarray, np.ndarray]:
    """MGCS's similarity scaled by the agreement of a pair's modality offset with its
    neighbours' (:func:`~mispair.division.gap.gap_corrected_similarity`; pooled embeddings)."""
    fold = _encoded(model, pairs, settings)
    return gap_corrected_similarity(fold.pair_images.float(), fold.pair_texts.float()).numpy(), NO_SCORES


SCORE_KINDS: dict[str, ScoreKindSpec] = {
    "similarity": ScoreKindSpec(_similarity, decoys=True),
    "contrast": ScoreKindSpec(_contrast, decoys=True),
    "contrast_structure": ScoreKindSpec(_contrast_structure, decoys=False),
    "gap_corrected": ScoreKindSpec(_gap_corrected, decoys=False),
}
"""Every held-out score kind by its name (``division.pair_score``)."""


def scores_and_decoys(
    model: RetrievalModel,
    pairs: TrainingPairs,
    decoys: np.ndarray,
    *,
    kind: ScoreKind = "similarity",
    settings: KindSettings = KindSettings(),
) -> tuple[np.ndarray, np.ndarray]:
    """The ``kind`` scores of ``pairs`` under ``model`` and those of their ``decoys [m, 2]``
    (:mod:`mispair.engine.held_out.decoys`), scored as a real pair of ``pairs`` is."""
    spec = SCORE_KINDS[kind]
    decoys = np.asarray(decoys, dtype=np.int64).reshape(-1, 2)
    if not spec.decoys and len(decoys):
        with_decoys = ", ".join(name for name, s in SCORE_KINDS.items() if s.decoys)
        raise ValueError(f"pair score {kind!r} has no decoys (only {with_decoys})")
    return spec.score(model, pairs, decoys, settings)


def held_out_scores(
    model: RetrievalModel,
    pairs: TrainingPairs,
    *,
    kind: ScoreKind = "similarity",
    settings: KindSettings = KindSettings(),
) -> np.ndarray:
    """``[len(pairs)]`` the ``kind`` score (:data:`SCORE_KINDS`) of each pair of ``pairs`` under
    ``model`` (higher = more likely matched)."""
    return scores_and_decoys(model, pairs, np.zeros((0, 2), dtype=np.int64), kind=kind, settings=settings)[0]

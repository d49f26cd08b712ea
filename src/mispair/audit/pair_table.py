"""The audit's pair table: every pair of the audited collection as its models read them
(:class:`AuditedPairs`), and ``pairs.csv``'s rows built from them (:func:`pair_table`): the
verdicts, the suggested captions and pictures, the duplicates and the reasons in words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mispair.audit.duplicates import Duplicates
from mispair.audit.ranking import BestMatches, others, suspicion_order
from mispair.audit.words import answered, why
from mispair.data.batching import TrainingPairs
from mispair.division.calibration import Calibration, Stratum, calibrate
from mispair.division.scores import PAIR_SCORES_FILE, DivisionScores
from mispair.engine.assembly import other_splits
from mispair.engine.held_out.audit_rows import pair_names, picture_names
from mispair.engine.run import RunOutcome
from mispair.engine.trained import TrainedRun
from mispair.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd


VERDICT_NUMBERS = (
    "rank",
    "split",
    "mismatch_probability",
    "suspected",
    "q_value",
    "held_out_score",
    "pair_similarity",
)
"""``pairs.csv``'s verdict columns: a pair's numbers, the same whatever form or row order the
collection is read in (the pairs known by picture and caption)."""


def verdict_columns(columns: list[str] | tuple[str, ...]) -> list[str]:
    """:data:`VERDICT_NUMBERS` and, of ``columns`` (a ``pairs.csv``'s), every suggestion's score
    and map coordinate: the columns two audits of the same pairs must agree on."""
    return [*VERDICT_NUMBERS, *(c for c in columns if "_score_" in c or c.startswith("map_"))]


@dataclass
class AuditedPairs:
    """Every pair of an audited collection, as the run's models read them.

    ``pairs``: the training pairs (as the run paired them: planted swaps included) followed by the
    dev and test pairs; ``split [n]`` each pair's split; ``pair_id [n]`` its stable id (the
    reader's, else ``split/k``); ``score [n]`` its held-out score (higher = more likely matched);
    ``planted [n]`` bool, the swaps the audit planted (None without any); ``true_image [n]`` the
    image each caption was written for, when a noise record says so.
    """

    pairs: TrainingPairs
    split: np.ndarray
    pair_id: list[str]
    score: np.ndarray
    truly_mismatched: np.ndarray | None
    true_image: np.ndarray | None
    planted: bool
    null: tuple[np.ndarray, ...] | None = None
    """The decoys' scores of each stratum of ``score``: the training pairs' (the first
    ``n_train``), then the other splits' where they were scored; None where the run scored none."""
    n_train: int = 0

    def calibration(self, rows: np.ndarray | None = None) -> Calibration | None:
        """The pairs' calibrated numbers (:func:`~mispair.division.calibration.calibrate`), or
        None without decoys; of the pairs ``rows`` only (``[n]`` bool) when given, against the
        same decoys (the share of those pairs, e.g. the pairs outside the join errors found)."""
        if self.null is None:
            return None
        kept = np.ones(len(self.score), dtype=bool) if rows is None else np.asarray(rows, dtype=bool)
        ends = [self.n_train] if len(self.null) == 2 else []
        parts = [score[keep] for score, keep in zip(np.split(self.score, ends), np.split(kept, ends))]
        return calibrate([Stratum(score, null) for score, null in zip(parts, self.null)])

    @property
    def image_ids(self) -> list[str]:
        ids = self.pairs.pairs.image_ids
        return ids if ids is not None else [str(i) for i in range(self.pairs.pairs.n_images)]

    def pictures_shown(self, images: np.ndarray, order: np.ndarray) -> list[str]:
        """The names of ``images [n]`` (a picture per pair) for the pairs ``order``
        (:func:`~mispair.engine.held_out.audit_rows.picture_names`: the pair's own row's name for
        its picture where it is the picture the input pairs it with, else the picture's id)."""
        return picture_names(self.pairs, images, order)


def audited_pairs(
    run: TrainedRun, *, progress: bool = False, outcome: RunOutcome | None = None
) -> AuditedPairs:
    """:class:`AuditedPairs` of a trained audit run (its division scored the other splits): from
    the ``outcome`` of the run that just trained it (its scores and splits as the run had them,
    nothing read again), else from the run's folder (``pair_scores.npz``, its collection)."""
    if outcome is None:
        scores = DivisionScores.read(run.provenance.folder / PAIR_SCORES_FILE)
        others = other_splits(run.config, run.data)
    else:
        scores, others = outcome.scores, outcome.others
    if scores is None:
        raise ConfigError("the audit's run made no held-out scores (set division.scored_by)")
    parts = [run.train] if others is None else [run.train, others]
    everything = TrainingPairs.join(parts)
    run.prepare_texts(everything.tokens, progress=progress)
    data = run.config.data
    split = [data.train_split] * len(run.train)
    if others is not None:
        if scores.others is None or len(scores.others) != len(others):
            raise ConfigError(
                f"{run.config.output_dir}: its scores do not cover the dev and test pairs; "
                "audit into a new folder"
            )
        split += [data.dev_split] * run.data.dev.n_captions
        split += [data.test_split] * (len(others) - run.data.dev.n_captions)
    score = scores.train if others is None else np.concatenate([scores.train, scores.others])
    noise, n_others = run.data.noise, len(everything) - len(run.train)
    null: tuple[np.ndarray, ...] | None = None
    if scores.null is not None and others is None:
        null = (scores.null,)
    elif scores.null is not None and scores.null_others is not None:
        null = (scores.null, scores.null_others)
    truth = true_image = None
    if noise is not None:
        truth = np.concatenate([noise.is_noisy, np.zeros(n_others, dtype=bool)])
        true_image = np.concatenate([noise.true_image, everything.image_of_caption[len(run.train) :]])
    return AuditedPairs(
        everything,
        np.array(split),
        pair_names(everything, split),
        score,
        truth,
        true_image,
        planted=data.noise.rate > 0,
        null=null,
        n_train=len(run.train),
    )


def pair_table(
    audited: AuditedPairs,
    mismatch: np.ndarray,
    suspected: np.ndarray,
    matches: BestMatches,
    duplicates: Duplicates,
    q_value: np.ndarray | None = None,
    answers: tuple[np.ndarray, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Every pair as a row, from the most suspect to the least (``pairs.csv``): its scores, the
    :data:`~mispair.audit.ranking.SUGGESTIONS` best other captions for its image and other images
    for its caption, its duplicates (``duplicate_image_of``: the id of the first near-duplicate
    of its image or ""; ``same_caption_images``; ``leak``) and ``why`` it is suspect in words.
    ``answers``: a person's answers fixed into ``mismatch``, ``suspected`` and ``q_value``
    (``judged [n]``: 1 mismatched, 0 correct, NaN none or unsure; and the scores' own mismatch
    probability ``[n]``): a judged pair's ``why`` leads with the answer, then the scores' words."""
    import pandas as pd

    captions = audited.pairs.pairs.captions
    order = suspicion_order(audited.score, mismatch, audited.pair_id)
    suggested = Suggestions.of(audited, matches, order)
    columns: dict[str, Any] = {
        "pair_id": [audited.pair_id[k] for k in order],
        "rank": np.arange(1, len(order) + 1),
        "split": audited.split[order],
        "image_id": audited.pictures_shown(audited.pairs.image_of_caption, order),
        "caption": [captions[k] for k in order],
        "mismatch_probability": mismatch[order].round(6),
        "suspected": suspected[order],
        "q_value": (np.full(len(order), np.nan) if q_value is None else q_value[order]).round(6),
        "held_out_score": audited.score[order].round(6),
        "pair_similarity": matches.pair_score[order].round(6),
    }
    columns.update(suggested.columns(audited))
    columns.update(_duplicate_columns(audited, duplicates, order))
    scored = mismatch if answers is None else answers[1]
    probability = None if q_value is None else scored
    columns["why"] = reasons(audited, order, matches, duplicates, suggested, probability)
    if answers is not None:
        columns["why"] = answered(answers[0][order], columns["why"])
    if audited.truly_mismatched is not None and audited.true_image is not None:
        columns["truly_mismatched"] = audited.truly_mismatched[order]
        columns["true_image_id"] = audited.pictures_shown(audited.true_image, order)
    return pd.DataFrame(columns)


@dataclass(frozen=True)
class Suggestions:
    """In the table's ``order``: the best other captions of each pair's image (``captions``,
    ``[n, SUGGESTIONS]`` indices, -1: none) with their ``caption_scores``, and the best other
    images of its caption (``images``) with their ``image_scores``."""

    captions: np.ndarray
    caption_scores: np.ndarray
    images: np.ndarray
    image_scores: np.ndarray

    @classmethod
    def of(cls, audited: AuditedPairs, matches: BestMatches, order: np.ndarray) -> Suggestions:
        paired = audited.pairs.image_of_caption[order]
        captions, caption_scores = others(matches.captions[paired], matches.caption_scores[paired], order)
        images, image_scores = others(matches.images[order], matches.image_scores[order], paired)
        return cls(captions, caption_scores, images, image_scores)

    def columns(self, audited: AuditedPairs) -> dict[str, Any]:
        """``suggested_caption_{n}`` and its score, then ``suggested_image_id_{n}`` and its score."""
        ids, captions = audited.image_ids, audited.pairs.pairs.captions
        columns: dict[str, Any] = {}
        for n in range(self.captions.shape[1]):
            columns[f"suggested_caption_{n + 1}"] = [
                captions[c] if c >= 0 else "" for c in self.captions[:, n]
            ]
            columns[f"suggested_caption_score_{n + 1}"] = self.caption_scores[:, n].round(6)
        for n in range(self.images.shape[1]):
            columns[f"suggested_image_id_{n + 1}"] = [ids[i] if i >= 0 else "" for i in self.images[:, n]]
            columns[f"suggested_image_score_{n + 1}"] = self.image_scores[:, n].round(6)
        return columns


def _duplicate_columns(audited: AuditedPairs, duplicates: Duplicates, order: np.ndarray) -> dict[str, Any]:
    """``duplicate_image_of`` (the first near-duplicate's image id or ""), ``same_caption_images``
    and ``leak``, in the table's ``order``."""
    ids, twin = audited.image_ids, duplicates.duplicate_of[audited.pairs.image_of_caption[order]]
    return {
        "duplicate_image_of": [ids[i] if i >= 0 else "" for i in twin],
        "same_caption_images": duplicates.same_caption_images[order],
        "leak": duplicates.leak[order],
    }


def reasons(
    audited: AuditedPairs,
    order: np.ndarray,
    matches: BestMatches,
    duplicates: Duplicates,
    suggested: Suggestions,
    probability: np.ndarray | None,
) -> list[str]:
    """:func:`why` of each pair, in the table's ``order``."""
    ids, captions = audited.image_ids, audited.pairs.pairs.captions
    twins = duplicates.duplicate_of[audited.pairs.image_of_caption[order]]
    reasons = zip(
        order, suggested.captions[:, 0], suggested.caption_scores[:, 0], matches.pair_score[order], twins
    )
    return [
        why(
            int(matches.better_images[k]),
            captions[c] if c >= 0 else None,
            score > pair,
            at_least=matches.better_cap is not None and matches.better_images[k] >= matches.better_cap,
            among_suspects=matches.suspects_only,
            duplicate_of=ids[twin] if twin >= 0 else "",
            same_caption=int(duplicates.same_caption_images[k]),
            leak=bool(duplicates.leak[k]),
            probability=None if probability is None else float(probability[k]),
        )
        for k, c, score, pair, twin in reasons
    ]

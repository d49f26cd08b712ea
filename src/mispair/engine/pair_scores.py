"""Pair scores the scoring model has not memorised: out-of-fold and early-epoch similarities.

A division that scores the pairs its own model trained on sees the mismatched pairs fitted
within a few epochs on a small collection (in-sample detection AUC falls towards 0.5). Here:

- **out of fold**: the training pairs are split into ``k`` folds by their content: the images
  that share an identical caption or nearly duplicate each other stay in one fold
  (:mod:`mispair.data.content`); each fold is scored by a model trained on the other ``k − 1``
  folds only, so neither the caption text nor the picture (under any name) of a scored pair was
  ever trained on by the model that scores it, and the folds do not depend on the row order;
  ``repeats`` partitions of the groups, each pair's score the mean of its repeats (the mean of
  several held-out scorers varies less than one: on Tux Paint at 0.4, detection AUC 0.85 → 0.90
  with 3 repeats and 3 rounds instead of 1 and 2);
- **early**: one model trained on all pairs, each pair's similarity averaged over its first
  epochs, before the mismatched pairs are fitted (one training instead of ``k``: for large data).

:func:`division_scores` computes what a run's ``division`` section asks for, once per run (kept
in the run's folder as ``pair_scores.npz``); the division recipes fit their mixtures to these
scores instead of their own losses, and ``--export-pairs`` writes them. In a multi-process run the
folds are dealt over the ranks (each trains its folds' scorers alone) and every rank gets every
score.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from mispair.atomic import atomic_write
from mispair.config import RunConfig
from mispair.data import mapped
from mispair.data.batching import TrainingPairs
from mispair.data.content import ContentGroups, content_folds, fold_groups
from mispair.data.pairset import PairSet
from mispair.distributed import SINGLE_PROCESS, Shard, broadcast, from_main, sum_over
from mispair.division.gap import gap_corrected_similarity
from mispair.division.scores import DivisionScores, clean_split
from mispair.division.structure import structure_checked_probability
from mispair.encoding import encode_split, evaluating, frozen
from mispair.engine.assembly import REFERENCE_NEEDS_NOISE, RunData, build_models
from mispair.engine.decoys import DECOYS_PER_PAIR, cells_of, decoy_pairs, local_decoys
from mispair.engine.export import pair_similarities
from mispair.engine.side_by_side import (
    LinearInputs,
    ScorerJob,
    side_by_side_spec,
    train_side_by_side,
)
from mispair.engine.trainer import Trainer
from mispair.errors import ConfigError
from mispair.methods.base import RecipeContext, build_options, get_recipe
from mispair.nn.allpairs import all_pair_similarities
from mispair.nn.linear_backbone import LINEAR_WEIGHTS
from mispair.nn.model import RetrievalModel
from mispair.progress import progress_bar
from mispair.safe_parse import read_npz
from mispair.seeds import child_seed


@dataclass(frozen=True)
class OutOfFoldScores:
    """``score [n_pairs]``: each training pair's score under the models that held it out, the mean
    over the repeats (higher = more likely matched); ``fold [repeats, n_pairs]``: the fold that held
    the pair out in each repeat's partition; ``others [n_others]``: each pair of the other splits
    (cross-fitting: none of the scorers saw them), the mean over every scorer; ``scorers``: the
    weights of the scorers this process trained (for warm-started refinement rounds)."""

    score: np.ndarray
    fold: np.ndarray
    others: np.ndarray | None = None
    scorers: dict[int, dict[str, Tensor]] | None = None
    """This process's scorers' weights by job (``repeat × folds + fold``), when asked to keep them."""
    null: np.ndarray | None = None
    """``[m]``: the decoy pairs' scores (:mod:`mispair.engine.decoys`), each the mean over the
    repeats like a training pair's; None where the score kind has no decoys."""
    null_others: np.ndarray | None = None
    """``[m_others]``: decoys of the other splits, each the mean over every scorer like theirs."""
    decoys: np.ndarray | None = None
    """``[m, 2]``: the training pairs' decoys, ``(caption, pair whose picture it is shown with)``."""


class FoldStash:
    """Finished scorers' held-out scores of an out-of-fold scoring kept on disk
    (``folder/<round>_<scorer>.npz``, scorer = repeat × folds + fold, written atomically, each
    tagged with ``key``: what the scores depend on), so an interrupted scoring resumes at its first
    missing scorer; :meth:`clear` removes them once the whole scores are saved."""

    def __init__(self, folder: Path, key: str) -> None:
        self.folder, self.key = folder, key

    def load(self, round_index: int, scorer: int) -> np.ndarray | None:
        path = self.folder / f"{round_index}_{scorer}.npz"
        if not path.is_file():
            return None
        saved = read_npz(path, ("score", "key"))
        return saved["score"] if str(saved.get("key")) == self.key else None

    def save(self, round_index: int, scorer: int, score: np.ndarray, weights: dict | None = None) -> None:
        """Keep a finished scorer's held-out scores (and its ``weights``, which a warm-started
        next round starts from; written first, so scores on disk always have theirs)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if weights is not None:
            atomic_write(
                self.folder / f"{round_index}_{scorer}.pt",
                lambda handle: torch.save({"key": self.key, "weights": weights}, handle),
            )
        atomic_write(
            self.folder / f"{round_index}_{scorer}.npz",
            lambda handle: np.savez(handle, score=score, key=np.array(self.key)),
        )

    def load_weights(self, round_index: int, scorer: int) -> dict[str, Tensor] | None:
        """The weights kept with a finished scorer, or None."""
        path = self.folder / f"{round_index}_{scorer}.pt"
        if not path.is_file():
            return None
        saved = torch.load(path, map_location="cpu", weights_only=True)
        return saved["weights"] if saved.get("key") == self.key else None

    def clear(self) -> None:
        if self.folder.is_dir():
            for path in [*self.folder.glob("*.npz"), *self.folder.glob("*.pt")]:
                path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.folder.rmdir()


CONTRAST_IMAGES = 4096
"""The most images a ``contrast`` score weighs a pair against: a larger fold is scored in content
groups of about this many images (:func:`contrast_groups`), so the score's cost grows linearly
with the collection, not with the square of a fold (Tux Paint's and OpenClipart's folds, 150 and
1,080 images, are scored whole)."""

FOLDS_BY = "content"
"""How the folds are dealt (part of the cache key: scores kept from folds dealt by image index
before are computed again)."""


def other_groups(others: TrainingPairs, group_images: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``([n_pairs], [n_pairs])``: the group of every pair of the other splits, their content
    groups (:func:`~mispair.data.content.fold_groups`) dealt (``seed``) into groups of about
    ``group_images`` images, the size of a training fold, so that a ``contrast`` score weighs a pair
    against as many other images as a held-out training pair; and each pair's content group."""
    n_images = others.pairs.n_images
    groups = max(1, round(n_images / max(group_images, 1)))
    content = fold_groups(others.pairs.images, others.tokens, others.image_of_caption, max(groups, 2))
    of_pair = content.of_image[others.image_of_caption]
    if groups == 1:
        return np.zeros(len(others), dtype=np.int64), of_pair
    return content_folds(content, others.image_of_caption, groups, seed), of_pair


def out_of_fold_scores(
    config: RunConfig,
    data: RunData,
    train: TrainingPairs,
    *,
    folds: int = 5,
    repeats: int = 1,
    device: torch.device | str = "cpu",
    trusted: np.ndarray | None = None,
    score_kind: ScoreKind = "similarity",
    tau: float = 0.05,
    train_fold: Callable[[Trainer], None] | None = None,
    progress: bool = False,
    stash: FoldStash | None = None,
    round_index: int = 0,
    shard: Shard = SINGLE_PROCESS,
    others: TrainingPairs | None = None,
    content: ContentGroups | None = None,
    start: dict[int, dict[str, Tensor]] | None = None,
    keep_scorers: bool = False,
) -> OutOfFoldScores:
    """Score every pair of ``train`` with a model that never saw it (module docstring).

    Each fold's model is built, trained and scored as ``config`` says (recipe, model, train
    settings and epochs; a plain ``vse`` scorer is the usual choice) on the pairs of the other
    folds, with the pairing of ``train`` (noisy or not).

    Args:
        config: the scoring run (its recipe must train a single model).
        data: the run's data (for the tokenizer size and features).
        train: the training pairs to score, as paired.
        folds: ``k``.
        repeats: how many partitions into ``k`` folds (each with its own seed and its own ``k``
            scorers); a pair's score is the mean of its held-out scores over them.
        device: where the fold models train.
        trusted: ``[n_pairs]`` bool: the fold models train on the trusted pairs of the other
            folds only (a refinement round's clean split; the truly clean pairs give the
            clean-trained reference detector); every pair is still scored. Default: all pairs.
        score_kind: what a held-out pair's score is (:func:`held_out_scores`).
        tau: the temperature of the ``contrast`` score.
        train_fold: trains one fold's :class:`Trainer` (default: ``config.train.epochs``
            epochs of :meth:`Trainer.train_epoch`); a hook for tests.
        progress: a progress bar over the folds.
        stash: where finished folds are kept (round ``round_index``) and read back on resume.
        shard: in a multi-process run, this rank trains the scorers ``rank, rank + world, ...``
            (of the ``repeats × k``) and the scores are summed over the ranks.
        others: pairs no scorer trains on (the dev and test splits): every scorer scores them
            too (cross-fitting), in groups of a fold's size, and each gets the mean of its
            ``repeats × k`` scores.
        content: ``train``'s images grouped for dealing into ``folds`` folds
            (:func:`~mispair.data.content.fold_groups`), when computed before (every round of
            :func:`refined_out_of_fold_scores` deals the same groups).
        start: weights each job's scorer starts from (by job; a scorer that held the same fold
            out, so the held-out pairs stay unseen), instead of a fresh initialisation.
        keep_scorers: return this process's scorers' weights (``scorers``; kept in ``stash`` too).
    """
    if repeats < 1:
        raise ValueError(f"out-of-fold scoring needs at least 1 repeat, got {repeats}")
    seeds = [child_seed(config.train.seed, "repeat", r) for r in range(repeats)]
    if content is None:
        content = fold_groups(train.pairs.images, train.tokens, train.image_of_caption, folds)
    fold = np.stack([content_folds(content, train.image_of_caption, folds, seed) for seed in seeds])
    n_others = 0 if others is None else len(others)
    total = np.zeros(len(train) + n_others, dtype=np.float32)
    group = None
    with_decoys = score_kind in DECOY_KINDS
    decoy_seed = child_seed(config.train.seed, "decoys")
    no_decoys = np.zeros((0, 2), dtype=np.int64)
    decoys, other_decoys = no_decoys, no_decoys
    if with_decoys:
        held_together = np.concatenate([fold, _contrast_cells(content, train, fold, seeds, folds)])
        decoys = decoy_pairs(
            cells_of(held_together), content.of_image[train.image_of_caption], DECOYS_PER_PAIR, decoy_seed
        )
    if others is not None:
        group_images = min(-(-data.train.n_images // folds), CONTRAST_IMAGES)
        group, other_content = other_groups(others, group_images, config.train.seed)
        if with_decoys:
            other_decoys = decoy_pairs(group, other_content, DECOYS_PER_PAIR, decoy_seed + 1)
    decoy_total = np.zeros(len(decoys) + len(other_decoys), dtype=np.float32)
    device = torch.device(device)
    mine = range(shard.rank, repeats * folds, shard.world)  # job j: fold j % folds of repeat j // folds
    scorers: dict[int, dict[str, Tensor]] | None = {} if keep_scorers else None
    done: dict[int, tuple[np.ndarray, dict[str, Tensor] | None]] = {}
    todo: list[ScorerRun] = []
    for job in mine:
        repeat, k = divmod(job, folds)
        kept = None if stash is None else stash.load(round_index, job)
        weights = None if stash is None or not keep_scorers else stash.load_weights(round_index, job)
        held_decoys = len(local_decoys(decoys, np.flatnonzero(fold[repeat] == k), len(train))[0])
        if (
            kept is None
            or len(kept) != np.sum(fold[repeat] == k) + n_others + held_decoys + len(other_decoys)
            or (keep_scorers and weights is None)
        ):
            fold_seed = child_seed(seeds[repeat], "fold", k, folds)
            training = fold[repeat] != k if trusted is None else (fold[repeat] != k) & trusted
            todo.append(
                ScorerRun(
                    job,
                    replace(config, train=replace(config.train, seed=fold_seed)),
                    sampled(np.flatnonzero(training), config.division.scorer_pairs, fold_seed),
                    None if start is None else start[job],
                )
            )
        else:
            done[job] = (kept, weights)
    trained = trained_scorers(todo, data, train, device, train_fold)
    for run, model in progress_bar(
        trained, total=len(todo), desc="out-of-fold scorers", disable=not progress, leave=False
    ):
        repeat, k = divmod(run.job, folds)
        weights = {name: t.detach().cpu().clone() for name, t in model.state_dict().items()}
        score = partial(
            scores_and_decoys,
            model,
            kind=score_kind,
            tau=tau,
            batch_size=config.train.eval_batch_size,
            device=device,
        )
        held_out = np.flatnonzero(fold[repeat] == k)
        held = train.subset(held_out)
        local = local_decoys(decoys, held_out, len(train))[1]
        group_of_held = contrast_groups(content, held, run.config.train.seed)
        kept, kept_decoys = grouped_scores(score, held, group_of_held, local)
        if others is not None:
            other_kept, other_kept_decoys = grouped_scores(score, others, group, other_decoys)
            kept = np.concatenate([kept, other_kept])
            kept_decoys = np.concatenate([kept_decoys, other_kept_decoys])
        kept = np.concatenate([kept, kept_decoys])
        if stash is not None:
            stash.save(round_index, run.job, kept, weights if keep_scorers else None)
        done[run.job] = (kept, weights)
    for job in mine:
        kept, weights = done[job]
        held_out = np.flatnonzero(fold[job // folds] == job % folds)
        rows = local_decoys(decoys, held_out, len(train))[0]
        if scorers is not None:
            scorers[job] = weights
        n_scored = len(held_out) + n_others
        total[held_out] += kept[: len(held_out)]
        total[len(train) :] += kept[len(held_out) : n_scored]
        decoy_total[rows] += kept[n_scored : n_scored + len(rows)]
        decoy_total[len(decoys) :] += kept[n_scored + len(rows) :]
    total, decoy_total = np.split(sum_over(shard, np.concatenate([total, decoy_total])), [len(total)])
    other_scores = None if others is None else total[len(train) :] / np.float32(repeats * folds)
    null = null_others = None
    if with_decoys:
        null = decoy_total[: len(decoys)] / np.float32(repeats)
        null_others = None if others is None else decoy_total[len(decoys) :] / np.float32(repeats * folds)
    return OutOfFoldScores(
        total[: len(train)] / np.float32(repeats), fold, other_scores, scorers, null, null_others, decoys
    )


def _contrast_cells(
    content: ContentGroups, train: TrainingPairs, fold: np.ndarray, seeds: list[int], folds: int
) -> np.ndarray:
    """``[repeats, n_pairs]``: the contrast group (:func:`contrast_groups`) of every pair within the
    fold that holds it out, in each repeat: with the folds, where a decoy's two sides must lie
    together (:mod:`mispair.engine.decoys`)."""
    group = np.zeros_like(fold)
    for repeat, seed in enumerate(seeds):
        for k in range(folds):
            held_out = np.flatnonzero(fold[repeat] == k)
            fold_seed = child_seed(seed, "fold", k, folds)
            group[repeat, held_out] = contrast_groups(content, train.subset(held_out), fold_seed)
    return group


def sampled(pairs: np.ndarray, most: int | None, seed: int) -> np.ndarray:
    """``pairs`` (sorted indices), or a random sample of ``most`` of them (seeded, sorted) when
    there are more (``division.scorer_pairs``)."""
    if most is None or len(pairs) <= most:
        return pairs
    return np.sort(np.random.default_rng(seed).choice(pairs, size=most, replace=False))


def contrast_groups(content: ContentGroups, held: TrainingPairs, seed: int) -> np.ndarray:
    """``[len(held)]`` group of each held-out pair for its ``contrast`` score: one group when the
    fold has at most :data:`CONTRAST_IMAGES` images, else its content groups dealt (``seed``) into
    groups of about that many images."""
    groups = -(-len(np.unique(held.image_of_caption)) // CONTRAST_IMAGES)
    if groups == 1:
        return np.zeros(len(held), dtype=np.int64)
    return content_folds(content, held.image_of_caption, groups, seed)


def grouped_scores(
    score: Callable[[TrainingPairs, np.ndarray], tuple[np.ndarray, np.ndarray]],
    pairs: TrainingPairs,
    group: np.ndarray,
    decoys: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``([len(pairs)], [len(decoys)])``: ``score`` of each group of ``pairs`` (``group
    [len(pairs)]``) on its own, with the ``decoys [m, 2]`` (indices into ``pairs``, both sides of
    each in one group) of that group."""
    out = np.zeros(len(pairs), dtype=np.float32)
    out_decoys = np.zeros(len(decoys), dtype=np.float32)
    for g in np.unique(group):
        members = np.flatnonzero(group == g)
        rows, local = local_decoys(decoys, members, len(pairs))
        out[members], out_decoys[rows] = score(pairs.subset(members), local)
    return out, out_decoys


ScoreKind = Literal["similarity", "contrast", "contrast_structure", "gap_corrected"]

DECOY_KINDS = ("similarity", "contrast")
"""The score kinds whose decoys are scored (:func:`scores_and_decoys`); the others' scores depend
on structure over the whole fold that a single re-paired caption does not have."""


def scores_and_decoys(
    model: RetrievalModel,
    pairs: TrainingPairs,
    decoys: np.ndarray,
    *,
    kind: ScoreKind = "similarity",
    tau: float = 0.05,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`held_out_scores` of ``pairs`` and the scores of their ``decoys [m, 2]``: caption
    ``decoys[d, 0]`` shown with the picture of pair ``decoys[d, 1]`` (:mod:`mispair.engine.decoys`),
    scored as a real pair of ``pairs`` is: its ``similarity``, or its ``contrast`` from the same
    similarities, the caption's own picture left out of the images weighed against it and the
    picture's own captions out of the captions (as where a mismatched caption describes a picture
    the fold does not hold)."""
    decoys = np.asarray(decoys, dtype=np.int64).reshape(-1, 2)
    if kind not in DECOY_KINDS and len(decoys):
        raise ValueError(f"pair score {kind!r} has no decoys (only {', '.join(DECOY_KINDS)})")
    if kind == "similarity":
        score = pair_similarities([model], pairs, batch_size, torch.device(device))
        if not len(decoys):
            return score, np.zeros(0, dtype=np.float32)
        shown = TrainingPairs(
            pairs.pairs, [pairs.tokens[c] for c in decoys[:, 0]], pairs.image_of_caption[decoys[:, 1]]
        )
        return score, pair_similarities([model], shown, batch_size, torch.device(device))
    return _held_out(model, pairs, kind, tau, batch_size, device, decoys)


def held_out_scores(
    model: RetrievalModel,
    pairs: TrainingPairs,
    *,
    kind: ScoreKind = "similarity",
    tau: float = 0.05,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
) -> np.ndarray:
    """``[len(pairs)]`` score of each pair of ``pairs`` under ``model``: its similarity, or its
    ``contrast``: the mean of the log-probabilities, at temperature ``tau``, of its image among
    the images of ``pairs`` given its caption and of its caption among their captions given its
    image (:func:`contrast_scores`; scores the pair against its fold, not on its own scale);
    ``contrast_structure``: GSC's clean label, the lower of the mixture clean probabilities of
    its ``contrast`` score and of its structure consistency with the pairs of ``pairs``
    (:func:`~mispair.division.structure.structure_checked_probability`); ``gap_corrected``: MGCS's
    similarity scaled by the agreement of its modality offset with its neighbours'
    (:func:`~mispair.division.gap.gap_corrected_similarity`; pooled embeddings)."""
    if kind == "similarity":
        return pair_similarities([model], pairs, batch_size, torch.device(device))
    return _held_out(model, pairs, kind, tau, batch_size, device)[0]


def _held_out(
    model: RetrievalModel,
    pairs: TrainingPairs,
    kind: ScoreKind,
    tau: float,
    batch_size: int,
    device: torch.device | str,
    decoys: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The fold-wide score kinds of :func:`held_out_scores`, with the ``contrast`` scores of
    ``decoys`` (:func:`scores_and_decoys`)."""
    no_decoys = np.zeros(0, dtype=np.float32)
    images, paired = np.unique(pairs.image_of_caption, return_inverse=True)
    fold = PairSet(mapped.rows(pairs.pairs.images, images), [""] * len(pairs), paired)
    image_side, text_side = encode_split(model, fold, pairs.tokens, batch_size=batch_size, device=device)
    pair_images, pair_texts = image_side.pooled[torch.from_numpy(paired)].cpu(), text_side.pooled.cpu()
    if kind == "gap_corrected":
        return gap_corrected_similarity(pair_images.float(), pair_texts.float()).numpy(), no_decoys

    def rows(start: int, stop: int) -> Tensor:  # one block of images against every caption
        block = all_pair_similarities(model.similarity, image_side[start:stop], text_side, device=device)
        return block.float().cpu()

    shown = None
    if decoys is not None and len(decoys):
        shown = torch.from_numpy(np.stack([decoys[:, 0], paired[decoys[:, 1]]], axis=1))
    with evaluating(model):
        contrast = contrast_with_decoys(
            rows, len(images), torch.from_numpy(paired), tau, chunk=batch_size, decoys=shown
        )
    scores = contrast.score.numpy()
    if kind == "contrast_structure":
        return structure_checked_probability(pair_images, pair_texts, scores).astype(np.float32), no_decoys
    return scores, contrast.decoys.numpy()


def contrast_scores(
    sims: Tensor | Callable[[int, int], Tensor],
    n_images: int,
    image_of_caption: Tensor,
    tau: float,
    *,
    chunk: int = 256,
) -> Tensor:
    """``[n_captions]``: for similarities ``[n_images, n_captions]`` and each caption's paired
    image, ½ (log p(image | caption) + log p(caption | image)), softmaxes of ``sims / tau`` over
    all images, and over the captions of other images plus this one.

    ``sims`` is the matrix, or ``rows(start, stop)`` giving its rows ``start:stop``: the matrix
    is then read ``chunk`` images at a time and never held whole (memory ``chunk × n_captions``).
    """
    return contrast_with_decoys(sims, n_images, image_of_caption, tau, chunk=chunk).score


@dataclass(frozen=True)
class ContrastScores:
    """``score [n_captions]``: :func:`contrast_scores`; ``decoys [m]``: the decoys'
    (:func:`contrast_with_decoys`)."""

    score: Tensor
    decoys: Tensor


def contrast_with_decoys(
    sims: Tensor | Callable[[int, int], Tensor],
    n_images: int,
    image_of_caption: Tensor,
    tau: float,
    *,
    chunk: int = 256,
    decoys: Tensor | None = None,
) -> ContrastScores:
    """:func:`contrast_scores`, and those of ``decoys [m, 2]`` (caption, image): caption ``c``
    shown with image ``i``, ½ (log p(i | c) + log p(c | i)), where p(i | c) is the softmax over
    the images other than ``c``'s own and p(c | i) over the captions of images other than ``i``
    (among them ``c``): the scores of a caption and a picture whose true partners are not in the
    fold, from the same similarities (each decoy reads one more entry)."""
    rows = sims if callable(sims) else (lambda start, stop: sims[start:stop])
    n_captions = len(image_of_caption)
    decoys = torch.zeros((0, 2), dtype=torch.int64) if decoys is None else decoys
    column_lse = torch.full((n_captions,), float("-inf"))
    column_lse_others = torch.full((n_captions,), float("-inf"))
    positive, others = torch.zeros(n_captions), torch.zeros(n_captions)
    image_lse_others = torch.zeros(n_images)
    shown = torch.zeros(len(decoys))
    for start in range(0, n_images, chunk):
        logits = rows(start, min(start + chunk, n_images)) / tau
        image = torch.arange(start, start + logits.shape[0])
        column_lse = torch.logaddexp(column_lse, torch.logsumexp(logits, dim=0))
        same_image = image_of_caption[None, :] == image[:, None]
        masked = logits.masked_fill(same_image, float("-inf"))
        other_lse = torch.logsumexp(masked, dim=1)
        mine = torch.nonzero((image_of_caption >= start) & (image_of_caption < image[-1] + 1)).squeeze(1)
        local = image_of_caption[mine] - start
        positive[mine], others[mine] = logits[local, mine], other_lse[local]
        if len(decoys):
            column_lse_others = torch.logaddexp(column_lse_others, torch.logsumexp(masked, dim=0))
            image_lse_others[start : start + logits.shape[0]] = other_lse
            here = torch.nonzero((decoys[:, 1] >= start) & (decoys[:, 1] <= image[-1])).squeeze(1)
            shown[here] = logits[decoys[here, 1] - start, decoys[here, 0]]
    caption_to_image = positive - column_lse
    image_to_caption = positive - torch.logaddexp(others, positive)
    decoy_scores = torch.zeros(0)
    if len(decoys):
        decoy_caption_to_image = shown - column_lse_others[decoys[:, 0]]
        decoy_image_to_caption = shown - image_lse_others[decoys[:, 1]]
        decoy_scores = (decoy_caption_to_image + decoy_image_to_caption) / 2
    return ContrastScores((caption_to_image + image_to_caption) / 2, decoy_scores)


def refined_out_of_fold_scores(
    config: RunConfig,
    data: RunData,
    train: TrainingPairs,
    *,
    folds: int,
    rounds: int,
    repeats: int = 1,
    score_kind: ScoreKind = "similarity",
    tau: float = 0.05,
    device: torch.device | str = "cpu",
    progress: bool = False,
    stash: FoldStash | None = None,
    shard: Shard = SINGLE_PROCESS,
    others: TrainingPairs | None = None,
    refine_epochs: int | None = None,
) -> OutOfFoldScores:
    """``[n_pairs]`` out-of-fold scores after ``rounds`` rounds: round 1 trains the fold models on
    all pairs of the other folds; each later round trains them on the pairs of the other folds
    that the previous round's scores put in the clean split (a GMM on the scores, clean
    probability above ``division.p_threshold``), so the mismatched pairs no longer teach the
    scorers (the reference for this is the clean-trained detector: scorers trained on the truly clean
    pairs). The folds are dealt over ``shard``'s ranks and each round's split is fitted on rank 0.
    ``repeats`` and ``others``: as in :func:`out_of_fold_scores`, every round (the last round's
    scores are returned). With ``refine_epochs``, each later round's scorer of a fold starts from
    the previous round's scorer of that fold (trained on the other folds only: the fold stays
    unseen) and trains ``refine_epochs`` epochs on the new clean split instead of ``config``'s
    epochs from scratch."""
    trusted, start = None, None
    content = fold_groups(train.pairs.images, train.tokens, train.image_of_caption, folds)
    warm = refine_epochs is not None and rounds > 1
    refining = replace(config, train=replace(config.train, epochs=refine_epochs or config.train.epochs))
    for round_index in range(rounds):
        scores = out_of_fold_scores(
            config if start is None else refining,  # a warm-started round: its own, shorter schedule
            data,
            train,
            folds=folds,
            repeats=repeats,
            device=device,
            trusted=trusted,
            score_kind=score_kind,
            tau=tau,
            progress=progress,
            stash=stash,
            round_index=round_index,
            shard=shard,
            others=others,
            content=content,
            start=start,
            keep_scorers=warm and round_index < rounds - 1,
        )
        start = scores.scorers
        trusted = from_main(shard, lambda score=scores.score: clean_split(score, config.division.p_threshold))
    return scores


@dataclass(frozen=True)
class ScorerRun:
    """One held-out scorer to train: its ``job`` (``repeat × folds + fold``), its run ``config``
    (its own seed), the indices ``pairs`` of the training pairs it trains on and the weights it
    starts from (``start``; None: a fresh initialisation)."""

    job: int
    config: RunConfig
    pairs: np.ndarray
    start: dict[str, Tensor] | None = None


def trained_scorers(
    runs: list[ScorerRun],
    data: RunData,
    train: TrainingPairs,
    device: torch.device,
    train_fold: Callable[[Trainer], None] | None = None,
) -> Iterator[tuple[ScorerRun, RetrievalModel]]:
    """``(run, its trained model, frozen)`` for each of ``runs``, in order: all of them trained
    side by side (:mod:`mispair.engine.side_by_side`) when their model allows it, else one by one
    (:func:`train_scorer`; always with a ``train_fold`` hook)."""
    if not runs:
        return
    first = _initial_scorer(runs[0], data, device)
    spec = None if train_fold is not None else side_by_side_spec(runs[0].config, first)
    if spec is None:
        del first  # one model at a time, as each is trained
        for run in runs:
            model = train_scorer(
                run.config, data, train.subset(run.pairs), device, train_fold, start=run.start
            )
            yield run, model
        return
    models = [first, *(_initial_scorer(run, data, device) for run in runs[1:])]
    inputs = LinearInputs.of(first, train, device)
    jobs = [
        ScorerJob(run.pairs, run.config.train.seed, {n: model.state_dict()[n] for n in LINEAR_WEIGHTS})
        for run, model in zip(runs, models)
    ]
    for run, model, weights in zip(runs, models, train_side_by_side(jobs, inputs, spec, device)):
        model.load_state_dict({**model.state_dict(), **weights})
        yield run, frozen(model)


def _initial_scorer(run: ScorerRun, data: RunData, device: torch.device) -> RetrievalModel:
    """The model ``run`` starts from: built as :func:`train_scorer` builds it, with its start."""
    model = build_models(run.config, 1, data, device)[0]
    if run.start is not None:
        model.load_state_dict(run.start)
    return model


def train_scorer(
    config: RunConfig,
    data: RunData,
    pairs: TrainingPairs,
    device: torch.device,
    train_fold: Callable[[Trainer], None] | None = None,
    *,
    start: dict[str, Tensor] | None = None,
) -> RetrievalModel:
    """One scoring model of ``config`` trained on ``pairs`` in memory (no evaluation, no files),
    returned frozen (eval mode, no gradients); ``train_fold`` as in :func:`out_of_fold_scores`;
    ``start``: the weights it starts from (default: a fresh initialisation)."""
    recipe_cls = get_recipe(config.recipe)
    if recipe_cls.n_models != 1:
        raise ValueError(
            f"out-of-fold scoring trains a single model, recipe {config.recipe!r} has {recipe_cls.n_models}"
        )
    context = RecipeContext(
        pairs,
        config.train.batch_size,
        config.train.epochs,
        device,
        config.train.seed,
        config.train.eval_batch_size,
    )
    models = build_models(config, 1, data, device)
    if start is not None:
        models[0].load_state_dict(start)
    recipe = recipe_cls(models, build_options(recipe_cls, config.method), context)
    trainer = Trainer(config, recipe, progress=False)
    if train_fold is None:
        for epoch in range(config.train.epochs):
            trainer.train_epoch(epoch)
    else:
        train_fold(trainer)
    return frozen(models[0])


def early_epoch_scores(
    config: RunConfig,
    data: RunData,
    train: TrainingPairs,
    *,
    device: torch.device | str = "cpu",
    progress: bool = False,
    others: TrainingPairs | None = None,
) -> OutOfFoldScores:
    """Each pair's similarity under one scorer of ``config`` trained on all pairs of ``train``,
    averaged over the scorer's ``config.train.epochs`` epochs (scored after each): ``score
    [n_pairs]``, and ``others`` for the pairs of ``others`` (which it never trains on)."""
    device = torch.device(device)
    scored = train if others is None else TrainingPairs.join([train, others])
    total = np.zeros(len(scored), dtype=np.float64)

    def score_each_epoch(trainer: Trainer) -> None:
        epochs = progress_bar(
            range(config.train.epochs), desc="early scorer", disable=not progress, leave=False
        )
        for epoch in epochs:
            trainer.train_epoch(epoch)
            with evaluating(*trainer.recipe.models):
                total[:] += pair_similarities(
                    trainer.recipe.models, scored, config.train.eval_batch_size, device
                )

    train_scorer(config, data, train, device, score_each_epoch)
    mean = (total / config.train.epochs).astype(np.float32)
    return OutOfFoldScores(
        mean[: len(train)],
        np.zeros((0, len(train)), dtype=np.int64),
        None if others is None else mean[len(train) :],
    )


def scorer_config(config: RunConfig) -> RunConfig:
    """The scoring run of ``config``'s division: its data, model and train settings with the
    ``vse`` recipe, the ``division.scorer_options`` options and ``division.epochs`` epochs at a constant
    learning rate."""
    division = config.division
    train = replace(config.train, epochs=division.epochs, lr_decay_epochs=[])
    return replace(config, recipe="vse", method=dict(division.scorer_options), train=train)


def division_scores(
    config: RunConfig,
    data: RunData,
    train: TrainingPairs,
    device: torch.device,
    *,
    cache: Path | None = None,
    progress: bool = False,
    shard: Shard = SINGLE_PROCESS,
    others: TrainingPairs | None = None,
) -> DivisionScores | None:
    """The scores ``config.division`` asks for (higher = more likely matched), or None for
    ``in_sample``: of the training pairs and, given ``others`` (the dev and test pairs), of those
    too, scored by the same scorers, none of which trained on them. With ``cache`` (a run's
    ``pair_scores.npz``), scores computed for the same data, model, scorer and seed are read back
    instead of trained again, and the folds an interrupted out-of-fold scoring finished are kept
    beside it (``pair_scores.folds/``). In a multi-process run (``shard``) every rank calls it and
    gets rank 0's scores: the out-of-fold folds are dealt over the ranks (each keeps its own
    finished folds); the early scorer is trained by every rank (no rank waits idle on another)
    and rank 0's scores kept; rank 0 reads and writes the cache."""
    kind = config.division.scored_by
    if kind == "in_sample":
        return None
    scoring = scorer_config(config)
    key = _scores_key(scoring, train, others)
    cached = from_main(shard, lambda: None if cache is None else DivisionScores.read(cache, key))
    if cached is not None:
        return cached
    stash = None if cache is None else FoldStash(cache.with_suffix(".folds"), key)
    if kind == "out_of_fold" and config.division.reference:
        found = _reference_scores(scoring, data, train, device, shard, others)
    elif kind == "out_of_fold":
        division = config.division
        found = refined_out_of_fold_scores(
            scoring,
            data,
            train,
            folds=division.folds,
            rounds=division.rounds,
            repeats=division.repeats,
            score_kind=division.pair_score,
            tau=division.tau,
            device=device,
            progress=progress,
            stash=stash,
            shard=shard,
            others=others,
            refine_epochs=division.refine_epochs,
        )
    else:
        found = broadcast(
            shard, early_epoch_scores(scoring, data, train, device=device, progress=progress, others=others)
        )
    scores = DivisionScores(found.score, found.others, found.null, found.null_others)
    if cache is not None and shard.is_main:
        scores.save(cache, key)
    if stash is not None and shard.is_main:  # every rank's folds were summed into the scores
        stash.clear()
    return scores


def _reference_scores(
    scoring: RunConfig,
    data: RunData,
    train: TrainingPairs,
    device: torch.device,
    shard: Shard,
    others: TrainingPairs | None,
) -> OutOfFoldScores:
    """The clean-trained reference division (``division.reference``): out-of-fold scores of
    scorers trained on the truly matched pairs of the other folds, one round."""
    if data.noise is None or not data.noise.is_noisy.any():
        raise ConfigError(REFERENCE_NEEDS_NOISE)
    division = scoring.division
    return out_of_fold_scores(
        scoring,
        data,
        train,
        folds=division.folds,
        repeats=division.repeats,
        device=device,
        trusted=~data.noise.is_noisy,
        score_kind=division.pair_score,
        tau=division.tau,
        shard=shard,
        others=others,
    )


def _scores_key(scoring: RunConfig, train: TrainingPairs, others: TrainingPairs | None = None) -> str:
    """What the scores depend on: the scoring run's settings, how folds are dealt
    (:data:`FOLDS_BY`) and the pairing scored (and the other splits' pairing when they are scored
    too)."""
    settings = {k: v for k, v in asdict(scoring).items() if k not in ("name", "output")}
    settings["folds_by"] = FOLDS_BY
    settings["decoys_per_pair"] = DECOYS_PER_PAIR
    digest = hashlib.blake2b(json.dumps(settings, sort_keys=True, default=str).encode(), digest_size=16)
    digest.update(np.ascontiguousarray(train.image_of_caption).tobytes())
    if others is not None:
        digest.update(b"others")
        digest.update(np.ascontiguousarray(others.image_of_caption).tobytes())
    return digest.hexdigest()

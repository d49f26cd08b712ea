"""The NCR co-training skeleton shared by ``ncr``, ``asl`` and ``pc2``.

Two models; after ``warmup_epochs`` on all pairs, every epoch (NCR, Huang et al. 2021):

1. each model scores every training pair (:func:`~mispair.methods.scoring.per_sample_losses`;
   with ``division.scored_by`` other than ``in_sample``, the run's memorisation-free pair scores
   stand for both models' losses: :func:`~mispair.methods.scoring.division_losses`),
   the losses are min–max normalised and a two-component mixture gives each pair a clean
   probability (``mixture``: ``gmm`` | ``bmm`` | ``vbgmm``);
2. co-divide: model A trains on the split computed from model B's losses and vice versa — the
   pairs with clean probability above ``p_threshold`` are *labeled*, the rest *unlabeled*;
3. each model runs one pass over its labeled pairs, each step paired with a batch of unlabeled
   pairs (cycled); subclasses turn the two batches into losses.

``loss`` picks the pair loss of the warm-up and of the subclasses' soft-margin terms: the papers'
triplet (the default) or InfoNCE at temperature ``tau`` weighted by each pair's fraction of the
full margin (:func:`~mispair.losses.soft_pair_loss`); the division and the correspondence
prediction keep NCR's hinge costs either way.

When the true noise is known (synthetic noise), every epoch logs each model's detection AUC and the
precision/recall/F1 of its clean split.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from mispair.data.batching import Batch
from mispair.distributed import from_main
from mispair.division import co_divide, fit_bmm, fit_gmm, fit_vbgmm
from mispair.division.scores import TRAINING_MIXTURE, division_log, mixture_clean_probability
from mispair.encoding import evaluating
from mispair.losses import (
    PairLoss,
    correspondence_prediction,
    info_nce_loss,
    reduce_batch,
    soft_pair_loss,
    triplet_loss,
)
from mispair.methods.base import Recipe, Update, Warmup
from mispair.methods.scoring import clean_probability, division_losses
from mispair.nn.model import RetrievalModel
from mispair.seeds import child_seed

MIXTURES = {"gmm": fit_gmm, "bmm": fit_bmm, "vbgmm": fit_vbgmm}


@dataclass(frozen=True)
class CoTrainItem:
    """A co-training step of model ``model``: a batch of its labeled pairs (the other model's
    clean split) and a batch of its unlabeled pairs (None when it has none)."""

    model: int
    labeled: Batch
    unlabeled: Batch | None

    def to(self, device: torch.device | str) -> CoTrainItem:
        unlabeled = None if self.unlabeled is None else self.unlabeled.to(device)
        return replace(self, labeled=self.labeled.to(device), unlabeled=unlabeled)


@dataclass
class CoTrainingOptions:
    warmup_epochs: int = 1
    mixture: Literal["gmm", "bmm", "vbgmm"] = "gmm"
    p_threshold: float = 0.5
    margin: float = 0.2
    unlabeled_from: float = 0.5  # train unlabeled pairs from this fraction of co-training epochs
    division_batch_size: int = 0  # per-sample losses scored in batches of this; 0 = train.eval_batch_size
    loss: PairLoss = "triplet"  # the pair loss: the papers' triplet, or InfoNCE (soft_pair_loss)
    tau: float = 0.2  # InfoNCE's temperature (holdout's)


class CoTraining(Recipe):
    """Base of the co-divide recipes; subclasses implement :meth:`warmup_loss` and
    :meth:`cotrain_loss`."""

    n_models = 2
    Options = CoTrainingOptions

    def __init__(self, models, options, context) -> None:
        super().__init__(models, options, context)
        self.clean_prob: np.ndarray | None = None  # [n_models, n_pairs] from the last division

    # ---------------------------------------------------------------- division
    def begin_epoch(self, epoch: int) -> dict[str, float]:
        if epoch < self.options.warmup_epochs:
            return {}
        ctx = self.context
        size = self.options.division_batch_size or ctx.eval_batch_size
        seed = child_seed(ctx.seed, "division", epoch)
        if ctx.pair_scores is not None and self.options.mixture == "gmm":  # held-out scores: their mixture
            scores = ctx.pair_scores
            held_out = from_main(ctx.shard, lambda: mixture_clean_probability(scores, TRAINING_MIXTURE))
            self.clean_prob = np.tile(held_out, (len(self.models), 1))
            return self.detection_log(self.clean_prob)
        losses = division_losses(self.models, ctx, batch_size=size, seed=seed)
        self.clean_prob = clean_probability(losses, MIXTURES[self.options.mixture], ctx)
        return self.detection_log(self.clean_prob)

    def detection_log(self, clean_prob: np.ndarray, prefix: str = "division") -> dict[str, float]:
        """Each model's detection scores against the true noise (nothing when it is unknown)."""
        values: dict[str, float] = {}
        threshold = self.options.p_threshold
        for k, prob in enumerate(clean_prob):
            values.update(division_log(prob, self.context.is_noisy, threshold, f"{prefix}/{k}"))
        return values

    def labeled_split(self, k: int) -> np.ndarray:
        """Model ``k``'s labeled mask: the other model's clean split (co-divide). Like NCR, when
        no pair falls below the threshold, the 1% least clean pairs are made unlabeled."""
        prob = co_divide(list(self.clean_prob))[k]
        threshold = self.options.p_threshold
        if prob.min() > threshold:
            threshold = np.sort(prob)[len(prob) // 100]
        return prob > threshold

    # ---------------------------------------------------------------- batches
    def epoch_batches(self, epoch: int, seed: int) -> Iterator[Warmup | CoTrainItem]:
        """Model 0's items, then model 1's: :class:`Warmup` on all pairs during the warm-up,
        then a :class:`CoTrainItem` per labeled batch (unlabeled batches cycled)."""
        train, size = self.context.train, self.context.batch_size
        for k in range(len(self.models)):
            if epoch < self.options.warmup_epochs:
                for batch in train.batches(size, seed=child_seed(seed, "model batches", k)):
                    yield Warmup(batch, model=k)
                continue
            labeled = np.flatnonzero(self.labeled_split(k))
            unlabeled = np.flatnonzero(~self.labeled_split(k))
            own = child_seed(seed, "model batches", k)
            cycled = train.cycled_batches(size, seed=own, subset=unlabeled)
            for batch in train.batches(size, seed=own, subset=labeled):
                yield CoTrainItem(k, batch, next(cycled))

    def n_steps(self, epoch: int) -> int | None:
        train, size = self.context.train, self.context.batch_size
        if epoch < self.options.warmup_epochs or self.clean_prob is None:
            return len(self.models) * train.n_batches(size)
        return sum(train.n_batches(size, int(self.labeled_split(k).sum())) for k in range(2))

    def train_step(self, item: Warmup | CoTrainItem, epoch: int) -> Update:
        """One model update; each term is suffixed with the model index (``warmup_0``, ...)."""
        k = item.model
        if isinstance(item, Warmup):
            return Update({f"warmup_{k}": self.warmup_loss(self.models[k], item.batch)})
        terms = self.cotrain_loss(k, item.labeled, item.unlabeled, epoch)
        return Update({f"{name}_{k}": v for name, v in terms.items()})

    def warmup_loss(self, model: RetrievalModel, batch: Batch) -> Tensor:
        """NCR's warm-up on all pairs: :meth:`warmup_pair_loss`."""
        return self.warmup_pair_loss(model(batch.images, batch.tokens, batch.lengths))

    def warmup_pair_loss(self, sims: Tensor) -> Tensor:
        """The warm-up's scalar of a batch ``sims [B, B]``: the hinge loss summed over negatives
        (NCR), or with ``loss=infonce`` the plain InfoNCE at ``tau``; averaged over the batch."""
        opts = self.options
        if opts.loss == "infonce":
            return reduce_batch(info_nce_loss(sims, opts.tau), "mean")
        return reduce_batch(triplet_loss(sims, opts.margin), "mean")

    def pair_loss(self, sims: Tensor, margins: Tensor) -> Tensor:
        """``[B]`` the soft-margin terms of a batch: the hardest-negative triplet with margins
        ``α_i``, or the InfoNCE weighted by ``α_i / α`` (``loss``; :func:`soft_pair_loss`)."""
        opts = self.options
        return soft_pair_loss(sims, margins, loss=opts.loss, margin=opts.margin, tau=opts.tau)

    def reduce(self, per_sample: Tensor) -> Tensor:
        """A batch's soft-margin terms → a scalar: summed for the triplet (NCR), averaged for
        InfoNCE (as ``vse`` and ``holdout`` average it)."""
        return reduce_batch(per_sample, "mean" if self.options.loss == "infonce" else "sum")

    def cotrain_loss(self, k: int, labeled: Batch, unlabeled: Batch | None, epoch: int) -> dict[str, Tensor]:
        raise NotImplementedError

    def labeled_prob(self, k: int, batch: Batch) -> Tensor:
        """The clean probabilities (from the other model's division) of a labeled batch of ``k``."""
        prob = co_divide(list(self.clean_prob))[k][batch.index.cpu().numpy()]
        return torch.as_tensor(prob, dtype=torch.float32, device=batch.images.device)

    @torch.no_grad()
    def predict(self, model: RetrievalModel, batch: Batch) -> Tensor:
        """NCR's correspondence prediction of ``model`` for a batch (eval mode, no gradient)."""
        with evaluating(model):
            sims = model(batch.images, batch.tokens, batch.lengths)
        return correspondence_prediction(sims, self.options.margin)

    def use_unlabeled(self, epoch: int) -> bool:
        """Whether the unlabeled pairs are trained this epoch (NCR: the second half)."""
        start = self.options.warmup_epochs
        return epoch - start >= int((self.context.epochs - start) * self.options.unlabeled_from)

    # ---------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        if self.clean_prob is None:
            return {}
        return {"clean_prob": torch.as_tensor(self.clean_prob.mean(axis=0))}

    def export_scores(self) -> dict[str, np.ndarray]:
        return {} if self.clean_prob is None else {"clean_prob": self.clean_prob.mean(axis=0)}

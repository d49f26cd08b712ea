"""``vse``: the plain baseline — every pair trusted, triplet or InfoNCE loss, any head."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mispair.data.batching import Batch
from mispair.losses import Reduction, info_nce_loss, reduce_batch, triplet_loss
from mispair.methods.base import Recipe, Update, register_recipe


@register_recipe
class VSE(Recipe):
    """VSE++ (hardest-negative triplet) or cross-modal InfoNCE on all pairs, noisy or not.

    Options: ``loss`` (``triplet`` | ``infonce``), ``margin`` α, ``hardest`` (VSE++ max of
    hinges; NCR's warm-up uses the sum), ``hardest_after`` (epochs of sum before switching),
    ``tau`` (InfoNCE temperature), ``reduction`` over the batch (``mean``; VSE++ and NCR's
    reference sum: ``sum``). Two independently initialised models averaged: :class:`VSEPair`.
    """

    name = "vse"
    side_by_side = True  # with InfoNCE (mean): the step engine/held_out/side_by_side.py batches

    @dataclass
    class Options:
        loss: Literal["triplet", "infonce"] = "triplet"
        margin: float = 0.2
        hardest: bool = True
        hardest_after: int = 0
        tau: float = 0.05
        reduction: Reduction = "mean"

    def train_step(self, batch: Batch, epoch: int) -> Update:
        opts = self.options
        terms = {}
        for k, model in enumerate(self.models):
            sims = model(batch.images, batch.tokens, batch.lengths)
            if opts.loss == "infonce":
                loss = info_nce_loss(sims, opts.tau)
            else:
                hardest = opts.hardest and epoch >= opts.hardest_after
                loss = triplet_loss(sims, opts.margin, negatives="hardest" if hardest else "sum")
            suffix = "" if len(self.models) == 1 else f"_{k}"
            terms[f"{opts.loss}{suffix}"] = reduce_batch(loss, opts.reduction)
        return Update(terms)


@register_recipe
class VSEPair(VSE):
    """``vse2``: :class:`VSE` with two independently initialised models, each trained on every
    pair, their similarities averaged at test time: the matched baseline (and, on the truly clean
    pairs, the matched oracle) of a recipe that averages two models (``holdout``, the co-training
    recipes)."""

    name = "vse2"
    n_models = 2

"""``ncr``: Noisy Correspondence Rectifier (Huang et al., NeurIPS 2021) — the co-divide baseline."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from mispair.data.batching import Batch
from mispair.losses import soft_margin
from mispair.methods.base import register_recipe
from mispair.methods.cotrain import CoTraining, CoTrainingOptions


@register_recipe
class NCR(CoTraining):
    """Co-divide with a GMM (by default), labeled pairs trained with rectified soft margins.

    Labeled pair ``i`` of model A, with clean probability ``w_i`` from model B's division, gets
    the target ``ŷ_i = w_i + (1 − w_i) · p_i`` from model A's own prediction ``p_i``
    (:func:`correspondence_prediction`) and the hardest-negative triplet loss with the margin
    :func:`soft_margin` of ``ŷ_i``. From the second half of the co-training epochs, the unlabeled
    pairs are trained too, with ``ŷ`` the two models' averaged prediction. Warm-up: hinge loss
    summed over negatives on all pairs.

    NCR's public code (since 2023) broadcasts the ``[B]`` targets of labeled pairs against the
    ``[B, B]`` hinge matrix so that pair ``(i, j)`` takes the margin of sample ``j``; we implement
    the paper's per-sample semantics: both hinge terms of anchor ``i`` use ``α_i``. Losses are
    summed over the batch, as NCR does.

    ``loss=infonce`` (temperature ``tau``, 0.2 by default): the warm-up trains the plain InfoNCE,
    and the labeled (and later unlabeled) pair ``i`` the InfoNCE weighted by the fraction of the
    full margin its soft margin keeps, ``ℓ_i = (m^ŷ_i − 1)/(m − 1) · InfoNCE_i`` (m =
    ``soft_margin_curve``; :func:`~mispair.losses.soft_pair_loss`), averaged over the batch; the
    division and ``ŷ`` are NCR's as above.
    """

    name = "ncr"

    @dataclass
    class Options(CoTrainingOptions):
        soft_margin_curve: float = 10.0

    def cotrain_loss(self, k: int, labeled: Batch, unlabeled: Batch | None, epoch: int) -> dict[str, Tensor]:
        opts, model = self.options, self.models[k]
        w = self.labeled_prob(k, labeled)
        targets = w + (1 - w) * self.predict(model, labeled)
        sims = model(labeled.images, labeled.tokens, labeled.lengths)
        margins = soft_margin(targets, opts.margin, opts.soft_margin_curve)
        terms = {"labeled": self.reduce(self.pair_loss(sims, margins))}
        if unlabeled is not None and len(unlabeled) > 1 and self.use_unlabeled(epoch):
            targets_u = sum(self.predict(m, unlabeled) for m in self.models) / len(self.models)
            sims_u = model(unlabeled.images, unlabeled.tokens, unlabeled.lengths)
            margins_u = soft_margin(targets_u, opts.margin, opts.soft_margin_curve)
            terms["unlabeled"] = self.reduce(self.pair_loss(sims_u, margins_u))
        return terms

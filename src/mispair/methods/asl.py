"""``asl``: Asymmetric Similarity Learning (AAAI 2025) — VBGMM split, co-training, asymmetric loss."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from torch import Tensor

from mispair.data.batching import Batch
from mispair.losses import asymmetric_loss, reduce_batch, soft_boundary
from mispair.methods.base import register_recipe
from mispair.methods.cotrain import CoTraining, CoTrainingOptions


@register_recipe
class ASL(CoTraining):
    """NCR's co-training skeleton with a variational Bayesian GMM split and ASL's loss.

    Each labeled pair gets the soft label ``ŷ = w + (1 − w) · p`` (clean probability ``w`` from the
    other model's VBGMM division, own prediction ``p``, clipped to [0, 1]; "Soft Label Estimation
    with VBGMM", δ = ``p_threshold``), which sets the soft positive boundary ``σ·U_p`` of the
    asymmetric dynamic matching loss (ASL Eq. 5–6, both directions, "Robust Training"); the
    suspected-noisy (unlabeled) pairs are trained the same way from the second half of training
    with the two models' averaged prediction as ``ŷ``. Table 3 ablations: ``mixture=gmm``,
    ``loss=triplet`` (soft-margin triplet, ``α' = σ α`` with the same relaxation ``z``),
    ``warmup_epochs=0``. ``detach_weights=true`` treats the weights ``μ`` of Eq. 6 as constants
    in the backward pass (circle loss's gradient); the default differentiates through them, which
    gives the gradients the paper prints below Eq. 6.

    ``loss=infonce`` (temperature ``tau``, 0.2 by default): the warm-up trains the plain InfoNCE,
    and each labeled or unlabeled pair the InfoNCE weighted by its soft boundary,
    ``ℓ_i = σ_i · InfoNCE_i`` with ``σ_i = (z^ŷ_i − 1)/(z − 1)`` (the factor Eq. 6 puts on the
    positive boundary and the triplet ablation on the margin; :func:`~mispair.losses.soft_pair_loss`
    with ``α_i = σ_i α``), averaged over the batch; the VBGMM division and ``ŷ`` are unchanged.
    """

    name = "asl"

    @dataclass
    class Options(CoTrainingOptions):
        warmup_epochs: int = 5
        mixture: Literal["gmm", "bmm", "vbgmm"] = "vbgmm"
        loss: Literal["asymmetric", "triplet", "infonce"] = "asymmetric"
        m0: float = 0.2
        scale: float = 64.0
        z: float = 3.0
        detach_weights: bool = False

    def _pair_loss(self, sims: Tensor, soft_labels: Tensor) -> Tensor:
        opts = self.options
        soft_labels = soft_labels.clamp(0, 1)
        if opts.loss == "asymmetric":
            return asymmetric_loss(
                sims, soft_labels, m0=opts.m0, scale=opts.scale, z=opts.z, detach_weights=opts.detach_weights
            )
        return self.pair_loss(sims, opts.margin * soft_boundary(soft_labels, opts.z))

    def cotrain_loss(self, k: int, labeled: Batch, unlabeled: Batch | None, epoch: int) -> dict[str, Tensor]:
        model = self.models[k]
        w = self.labeled_prob(k, labeled)
        targets = w + (1 - w) * self.predict(model, labeled)
        sims = model(labeled.images, labeled.tokens, labeled.lengths)
        terms = {"labeled": reduce_batch(self._pair_loss(sims, targets), "mean")}  # ASL: not stated
        if unlabeled is not None and len(unlabeled) > 1 and self.use_unlabeled(epoch):
            targets_u = sum(self.predict(m, unlabeled) for m in self.models) / len(self.models)
            sims_u = model(unlabeled.images, unlabeled.tokens, unlabeled.lengths)
            terms["unlabeled"] = reduce_batch(self._pair_loss(sims_u, targets_u), "mean")
        return terms

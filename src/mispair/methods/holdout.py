"""``holdout``: mispair's own recipe — train on what memorisation-free pair scores trust.

The division recipes of the papers score the pairs their own models have trained on; on a small
collection those models fit the mismatched pairs within a few epochs and the division decays to
chance (docs/results.md). ``holdout`` takes its division from the run's held-out pair scores
(``division.scores: out_of_fold``, refined over ``division.rounds``, or ``early``;
:mod:`mispair.engine.pair_scores`), computed once before training, and trains one model:

- each pair's clean probability ``w`` is a two-component GMM over its held-out score (NCR's
  mixture, on scores no model has fitted);
- a trusted pair trains its positive: the hardest-negative triplet (VSE++) or InfoNCE, weighted
  by ``w`` (``weighting: soft``) or by ``w > p_threshold`` (``hard``);
- a suspected pair trains only its negatives: RCL's complementary loss (Eq. 15), weighted by
  ``1 − w`` and ``suspect_weight``, so its caption and image still shape the space without being
  pulled together (``suspect_loss: none`` drops it).

Every pair stays in the batches, so suspected captions and images serve as negatives of the
trusted ones. The ablations are options (benchmarks/compare_recipes.py: ``holdout-*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from mispair.data.batching import Batch
from mispair.division import detection_metrics, fit_gmm, min_max_normalize
from mispair.errors import ConfigError
from mispair.losses import Reduction, info_nce_loss, reduce_batch, triplet_loss
from mispair.losses.asymmetric import asymmetric_loss
from mispair.losses.complementary import complementary_loss
from mispair.methods.base import Recipe, Update, register_recipe


@register_recipe
class Holdout(Recipe):
    """One model trained on held-out-score division: trusted pairs on their positives, suspected
    pairs on their negatives only (module docstring)."""

    name = "holdout"
    n_models = 2

    @dataclass
    class Options:
        loss: Literal["triplet", "infonce", "asymmetric"] = "triplet"
        margin: float = 0.2
        hardest_after: int = 0  # epochs of summed hinges before the hardest negative (VSE++)
        tau: float = 0.05
        weighting: Literal["soft", "hard"] = "soft"
        p_threshold: float = 0.5
        suspect_loss: Literal["complementary", "none"] = "complementary"
        suspect_weight: float = 0.1
        reduction: Reduction = "mean"
        m0: float = 0.2  # asymmetric loss (ASL Eq. 5-6): margin, scale λ, relaxation z
        scale: float = 64.0
        z: float = 3.0

    def __init__(self, models, options, context) -> None:
        super().__init__(models, options, context)
        if context.pair_scores is None:
            raise ConfigError("recipe holdout: needs held-out pair scores "
                              "(division.scores: out_of_fold or early)")
        losses = min_max_normalize(-np.asarray(context.pair_scores, dtype=np.float64))
        self.clean_prob = fit_gmm(losses).clean_prob

    def begin_epoch(self, epoch: int) -> dict[str, float]:
        values = {"division/clean_fraction": float((self.clean_prob > self.options.p_threshold).mean())}
        if self.context.noise is not None:
            scores = detection_metrics(self.clean_prob, self.context.noise.is_noisy,
                                       threshold=self.options.p_threshold)  # fmt: skip
            values.update({f"division/{name}": v for name, v in scores.items()})
        return values

    def trust(self, batch: Batch) -> torch.Tensor:
        """``[B]`` the weight of each pair's positive term: ``w`` or ``w > p_threshold``."""
        prob = torch.as_tensor(self.clean_prob[batch.index.cpu().numpy()], dtype=torch.float32,
                               device=batch.images.device)  # fmt: skip
        return (prob > self.options.p_threshold).float() if self.options.weighting == "hard" else prob

    def train_step(self, batch: Batch, epoch: int) -> Update:
        trust = self.trust(batch)
        terms = {}
        for k, model in enumerate(self.models):
            own = self.model_terms(model, batch, trust, epoch)
            terms.update({f"{name}_{k}": v for name, v in own.items()})
        return Update(terms)

    def model_terms(self, model, batch: Batch, trust: torch.Tensor, epoch: int) -> dict[str, torch.Tensor]:
        opts = self.options
        sims = model(batch.images, batch.tokens, batch.lengths)
        if opts.loss == "asymmetric":  # the trust is ASL's soft label: no positive pull at 0
            loss = asymmetric_loss(sims, trust, m0=opts.m0, scale=opts.scale, z=opts.z)
            return {"asymmetric": reduce_batch(loss, opts.reduction)}
        if opts.loss == "infonce":
            positive = info_nce_loss(sims, opts.tau)
        else:
            hardest = epoch >= opts.hardest_after
            positive = triplet_loss(sims, opts.margin, negatives="hardest" if hardest else "sum")
        terms = {"trusted": reduce_batch(trust * positive, opts.reduction)}
        if opts.suspect_loss == "complementary":
            negative = complementary_loss(sims, kind="log", tau=opts.tau)
            terms["suspected"] = opts.suspect_weight * reduce_batch((1 - trust) * negative, opts.reduction)
        return terms

    def export_scores(self) -> dict[str, np.ndarray]:
        return {"clean_prob": self.clean_prob}

    def state_dict(self) -> dict:
        return {"clean_prob": torch.as_tensor(self.clean_prob)}

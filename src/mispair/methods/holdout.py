"""``holdout``: mispair's own recipe — train on what memorisation-free pair scores trust.

The division recipes of the papers score the pairs their own models have trained on; on a small
collection those models fit the mismatched pairs within a few epochs and the division decays to
chance (docs/results.md). ``holdout`` takes its division from the run's held-out pair scores
(``division.scored_by: out_of_fold``, averaged over ``division.repeats`` partitions and refined over
``division.rounds``, or ``early``; :mod:`mispair.engine.pair_scores`), computed once before
training (the configs: 3 repeats, 3 rounds, InfoNCE scorers at τ 0.2; detection AUC on Tux
Paint 0.85 → 0.92 at 0.4 and 0.74 → 0.83 at 0.7 against 1 repeat, 2 rounds, τ 0.05; the audit,
:data:`~mispair.audit.collection.AUDIT_RUN`: 2 rounds with nested trust):

- each pair's clean probability ``w`` is a two-component GMM over its held-out score (NCR's
  mixture, on scores no model has fitted); a person's answers (``division.answers``, ``mispair
  train --labels``) override it: ``w = 1`` for a pair judged correct, ``0`` for one judged
  mismatched (:func:`answered_clean_probability`);
- a trusted pair trains its positive: InfoNCE at temperature ``tau`` (the default; 0.2 had the
  best dev rSum of 0.03–0.2 on Tux Paint), the hardest-negative triplet (VSE++) or ASL's
  asymmetric loss, weighted by ``w`` (``weighting: soft``) or by ``w > division.p_threshold`` (``hard``);
  with ``q`` > 0 the InfoNCE is the generalized cross-entropy ``L_q``
  (:func:`~mispair.losses.info_nce.generalized_info_nce_loss`), which pulls an unlikely trusted pair
  less (dev rSum up at 0.7 and 0.8, down at 0.2: not the default; docs/results.md, "High noise");
- a suspected pair trains only its negatives: RCL's complementary loss (Eq. 15), weighted by
  ``1 − w`` and ``suspect_weight``, so its caption and image still shape the space without being
  pulled together (``suspect_loss: none`` drops it); or (``suspect_loss: neighbours``, IN2R) it
  is split, and its image and its caption are each trained towards a partner built from the
  trusted pairs nearest to them in their own modality, read from the other model's memory
  (:mod:`mispair.losses.neighbour_targets`; ``neighbours``, ``refiner``, ``memory_size``,
  ``neighbour_tau``; weight ``suspect_weight``).

Every pair stays in the batches, so suspected captions and images serve as negatives of the
trusted ones. Two models are trained alike from different initialisations and averaged at
evaluation; on the pretrained backbone's linear models (the audit's) a step computes both models'
similarities as one stack (:mod:`mispair.nn.linear_backbone`): the same terms, to rounding.
``rematch_from`` (off by default) re-pairs, from that epoch on, each suspected caption with a
suspected pair's image when the two are each other's most similar under the models (L2RM's
idea of rematching, over the whole suspected set); on Tux Paint at 0.4 about 70–80% of the
suspected captions are re-paired, only 35–45% with their true image, and the dev rSum falls, so
it stays an option. The ablations are options (benchmarks/compare_recipes.py: ``holdout-*``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import torch
from torch import nn

from mispair.data.batching import Batch, TrainingPairs
from mispair.distributed import from_main
from mispair.division.scores import TRAINING_MIXTURE, division_log, mixture_clean_probability
from mispair.encoding import cross_similarities
from mispair.errors import ConfigError
from mispair.losses import Reduction, info_nce_loss, reduce_batch, triplet_loss
from mispair.losses.asymmetric import asymmetric_loss
from mispair.losses.complementary import complementary_loss
from mispair.losses.info_nce import generalized_info_nce_loss
from mispair.losses.neighbour_targets import (
    GraphRefiner,
    PairMemory,
    nearest_partners,
    neighbour_target_loss,
)
from mispair.methods.base import Recipe, Update, register_recipe
from mispair.nn.linear_backbone import run_together, stacked_similarities


@register_recipe
class Holdout(Recipe):
    """Two models trained on a held-out-score division: trusted pairs on their positives,
    suspected pairs on their negatives only (module docstring)."""

    name = "holdout"
    n_models = 2
    needs_pair_scores = True

    @dataclass
    class Options:
        loss: Literal["infonce", "triplet", "asymmetric"] = "infonce"
        margin: float = 0.2  # triplet
        hardest_after: int = 0  # triplet: epochs of summed hinges before the hardest negative (VSE++)
        tau: float = 0.2  # InfoNCE's and the complementary loss's temperature
        q: float = 0.0  # > 0: the trusted InfoNCE as the generalized cross-entropy L_q
        weighting: Literal["soft", "hard"] = "soft"
        suspect_loss: Literal["complementary", "neighbours", "none"] = "complementary"
        suspect_weight: float = 0.1
        neighbours: int = 5  # IN2R (suspect_loss: neighbours): trusted neighbours per target
        refiner: Literal["graph", "mean"] = "graph"  # IN2R: how the neighbours become one target
        memory_size: int = 65536  # IN2R: rows of each model's memory of trusted pairs
        neighbour_tau: float = 0.05  # IN2R: the temperature of the loss on the targets
        reduction: Reduction = "mean"
        m0: float = 0.2  # asymmetric loss (ASL Eq. 5-6): margin, scale λ, relaxation z
        scale: float = 64.0
        z: float = 3.0
        rematch_from: int = -1  # epoch from which suspected captions are re-paired; -1 = never
        rematch_weight: float = 1.0  # the trust of a re-paired caption's new pair

        def __post_init__(self) -> None:
            for key in ("neighbours", "memory_size"):
                if getattr(self, key) < 1:
                    raise ConfigError(f"method.{key}: at least 1, got {getattr(self, key)}")
            if not self.neighbour_tau > 0:
                raise ConfigError(f"method.neighbour_tau: must be > 0, got {self.neighbour_tau}")
            if not 0 <= self.q <= 1:
                raise ConfigError(f"method.q: in [0, 1] (0: plain InfoNCE), got {self.q}")

    def __init__(self, models, options, context) -> None:
        super().__init__(models, options, context)
        if context.pair_scores is None:
            raise ConfigError(
                "recipe holdout: needs held-out pair scores (division.scored_by: out_of_fold or early)"
            )
        scores = context.pair_scores  # the held-out mixture, fitted once (rank 0)
        self.clean_prob = answered_clean_probability(
            from_main(context.shard, lambda: mixture_clean_probability(scores, TRAINING_MIXTURE)),
            context.answers,
        )
        self.pairs = context.train  # the training pairing, with suspected captions re-paired
        self.rematched = np.zeros(len(context.train), dtype=bool)
        if options.suspect_loss == "neighbours":
            self._build_neighbour_targets(models, options, context)

    def _build_neighbour_targets(self, models, options, context) -> None:
        """IN2R's parts (:mod:`mispair.losses.neighbour_targets`): per model a memory of trusted
        pairs (read by the other model) and two refiners (image → target caption, caption →
        target image); a pair is admitted to the memory when its clean probability is above the
        mean clean probability of the pairs above ``p_threshold`` (IN2R's ``avg_clean_prob``)."""
        with torch.no_grad():  # the pooled embedding size, whatever the encoder
            probe = context.train.batch(np.arange(1)).images.to(context.device)
            dim = models[0].encode_images(probe).pooled.shape[1]
        self.memories = [PairMemory(options.memory_size, dim, context.device) for _ in models]
        mean = options.refiner == "mean"
        self.refiners = nn.ModuleList(
            nn.ModuleList([GraphRefiner(dim, mean=mean), GraphRefiner(dim, mean=mean)]) for _ in models
        ).to(context.device)
        trusted = self.clean_prob[self.clean_prob > context.p_threshold]
        self.admit_above = float(trusted.mean()) if len(trusted) else 1.0
        self.suspected = self.clean_prob <= context.p_threshold

    def param_groups(self, lr: float) -> list[dict]:
        groups = super().param_groups(lr)
        if self.options.suspect_loss == "neighbours":
            groups[0]["params"] = groups[0]["params"] + list(self.refiners.parameters())
        return groups

    def begin_epoch(self, epoch: int) -> dict[str, float]:
        values = division_log(self.clean_prob, self.context.is_noisy, self.context.p_threshold)
        if 0 <= self.options.rematch_from <= epoch:
            values.update(self.rematch())
        return values

    def rematch(self) -> dict[str, float]:
        """Re-pair the suspected captions: a suspected caption and a suspected pair's image that
        are each other's most similar (under the models, which never pulled a suspected pair
        together) become a pair; the rest keep their pairing. Returns the log values."""
        ctx = self.context
        suspected = np.flatnonzero(self.clean_prob <= self.context.p_threshold)
        if len(suspected) < 2:
            return {}
        images = np.unique(ctx.train.image_of_caption[suspected])
        sims = cross_similarities(
            self.models, ctx.train, images, suspected, batch_size=ctx.eval_batch_size, device=ctx.device
        )
        best_image, best_caption = sims.argmax(dim=0).numpy(), sims.argmax(dim=1).numpy()
        mutual = best_caption[best_image] == np.arange(len(suspected))
        paired = ctx.train.image_of_caption.copy()
        paired[suspected[mutual]] = images[best_image[mutual]]
        self.rematched = np.zeros(len(paired), dtype=bool)
        self.rematched[suspected[mutual]] = True
        self.pairs = TrainingPairs(ctx.train.pairs, ctx.train.tokens, paired, shard=ctx.shard)
        values = {"rematch/fraction": float(mutual.mean())}
        if ctx.noise is not None and mutual.any():  # re-paired with the image it was written for
            truth = ctx.train.pairs.image_of_caption[suspected[mutual]]
            values["rematch/precision"] = float((truth == paired[suspected[mutual]]).mean())
        return values

    def epoch_batches(self, epoch: int, seed: int) -> Iterator[Batch]:
        return self.pairs.batches(self.context.batch_size, seed=seed)

    def trust(self, batch: Batch) -> torch.Tensor:
        """``[B]`` the weight of each pair's positive term: ``w`` or ``w > p_threshold``, and
        ``rematch_weight`` for a re-paired caption."""
        index = batch.index.cpu().numpy()
        prob = self.clean_prob[index]
        if self.options.weighting == "hard":
            prob = (prob > self.context.p_threshold).astype(np.float64)
        prob = np.where(self.rematched[index], self.options.rematch_weight, prob)
        return torch.as_tensor(prob, dtype=torch.float32, device=batch.images.device)

    def train_step(self, batch: Batch, epoch: int) -> Update:
        trust = self.trust(batch)
        terms = {}
        if self.together:  # every model's similarities of the batch at once, [S, B, B]
            sims = stacked_similarities(self.models, batch.images, batch.tokens, batch.lengths)
            positive, negative = self.pair_losses(sims, epoch)
            for k in range(len(self.models)):
                own = self.weighted_terms(trust, positive[k], None if negative is None else negative[k])
                terms.update({f"{name}_{k}": v for name, v in own.items()})
            return Update(terms)
        for k in range(len(self.models)):
            own = self.model_terms(k, batch, trust, epoch)
            terms.update({f"{name}_{k}": v for name, v in own.items()})
        return Update(terms)

    @cached_property
    def together(self) -> bool:
        """Whether a step computes the models' similarities together
        (:func:`~mispair.nn.linear_backbone.stacked_similarities`: linear backbones with InfoNCE,
        and no IN2R targets, which read each model's embeddings): the same terms, to rounding."""
        opts = self.options
        return opts.loss == "infonce" and opts.suspect_loss != "neighbours" and run_together(self.models)

    def model_terms(self, k: int, batch: Batch, trust: torch.Tensor, epoch: int) -> dict[str, torch.Tensor]:
        opts, model = self.options, self.models[k]
        images = model.encode_images(batch.images)
        texts = model.encode_texts(batch.tokens, batch.lengths)
        sims = model.similarity(images, texts)
        if opts.loss == "asymmetric":  # the trust is ASL's soft label: no positive pull at 0
            loss = asymmetric_loss(sims, trust, m0=opts.m0, scale=opts.scale, z=opts.z)
            return {"asymmetric": reduce_batch(loss, opts.reduction)}
        terms = self.weighted_terms(trust, *self.pair_losses(sims, epoch))
        if opts.suspect_loss == "neighbours":
            terms["neighbours"] = self.neighbour_term(k, batch, images.pooled, texts.pooled, trust)
        return terms

    def pair_losses(self, sims: torch.Tensor, epoch: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Of similarities ``sims [..., B, B]`` (one model's, or a stack of them): each pair's
        positive loss (InfoNCE, or the triplet) and, with ``suspect_loss: complementary``, its
        complementary loss (else None), ``[..., B]`` each."""
        opts = self.options
        if opts.loss == "infonce" and opts.q > 0:
            positive = generalized_info_nce_loss(sims, opts.tau, opts.q)
        elif opts.loss == "infonce":
            positive = info_nce_loss(sims, opts.tau)
        else:
            hardest = epoch >= opts.hardest_after
            positive = triplet_loss(sims, opts.margin, negatives="hardest" if hardest else "sum")
        if opts.suspect_loss != "complementary":
            return positive, None
        return positive, complementary_loss(sims, kind="log", tau=opts.tau)

    def weighted_terms(
        self, trust: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor | None
    ) -> dict[str, torch.Tensor]:
        """One model's terms of a batch from its pairs' losses ``[B]``: ``trusted`` (the positive
        weighted by ``trust``) and ``suspected`` (the complementary loss weighted by ``1 − trust``
        and ``suspect_weight``), each reduced over the batch."""
        opts = self.options
        terms = {"trusted": reduce_batch(trust * positive, opts.reduction)}
        if negative is not None:
            terms["suspected"] = opts.suspect_weight * reduce_batch((1 - trust) * negative, opts.reduction)
        return terms

    def neighbour_term(
        self, k: int, batch: Batch, images: torch.Tensor, texts: torch.Tensor, trust: torch.Tensor
    ) -> torch.Tensor:
        """IN2R on this batch for model ``k`` (pooled ``images``, ``texts`` ``[B, D]``): each
        suspected pair's image against a caption built from the other model's memory, its caption
        against a built image (½ each, :func:`neighbour_target_loss`), times ``suspect_weight``,
        reduced over the batch; then this model's trusted pairs above the admission bar enter its
        memory."""
        opts = self.options
        index = batch.index.cpu().numpy()
        suspected = torch.as_tensor(self.suspected[index], device=images.device)
        memory_images, memory_texts = self.memories[1 - k].rows()
        loss = images.new_zeros(len(index))
        if int(suspected.sum()) >= 2 and len(memory_images) >= 1:
            to_text, to_image = self.refiners[k]
            image_q, text_q = images[suspected], texts[suspected]
            target_text = to_text(nearest_partners(image_q, memory_images, memory_texts, opts.neighbours))
            target_image = to_image(nearest_partners(text_q, memory_texts, memory_images, opts.neighbours))
            loss[suspected] = (
                neighbour_target_loss(image_q, target_text, opts.neighbour_tau)
                + neighbour_target_loss(text_q, target_image, opts.neighbour_tau)
            ) / 2
        admitted = trust > self.admit_above
        self.memories[k].add(images[admitted], texts[admitted])
        return opts.suspect_weight * reduce_batch(loss, opts.reduction)

    def export_scores(self) -> dict[str, np.ndarray]:
        return {"clean_prob": self.clean_prob}

    def state_dict(self) -> dict:
        state = {"clean_prob": torch.as_tensor(self.clean_prob)}
        if self.options.suspect_loss == "neighbours":
            state["refiners"] = self.refiners.state_dict()
            state["memories"] = [memory.state_dict() for memory in self.memories]
        return state

    def load_state_dict(self, state: dict) -> None:
        if "refiners" in state:
            self.refiners.load_state_dict(state["refiners"])
            for memory, saved in zip(self.memories, state["memories"]):
                memory.load_state_dict(saved)


def answered_clean_probability(clean_prob: np.ndarray, answers: np.ndarray | None) -> np.ndarray:
    """``[n_pairs]`` the clean probabilities ``clean_prob`` with a person's ``answers [n_pairs]``
    in place of the scores' word: 1 where judged correct, 0 where judged mismatched (NaN: not
    judged or unsure, the scores' probability kept)."""
    if answers is None:
        return clean_prob
    judged = ~np.isnan(answers)
    return np.where(judged, 1.0 - np.nan_to_num(answers), clean_prob)

"""``rcl``: RCL's complementary contrastive learning (Hu et al., TPAMI 2023)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mispair.data.batching import Batch
from mispair.errors import ConfigError
from mispair.losses import reduce_batch
from mispair.losses.complementary import (
    ABLATION_LOSSES,
    COMPLEMENTARY_KINDS,
    complementary_loss,
    rcl_ablation_loss,
)
from mispair.methods.base import Recipe, Update, register_recipe
from mispair.seeds import child_seed


@register_recipe
class RCL(Recipe):
    """One model, no sample division: every pair is trained only through its negatives.

    The loss of each pair is the complementary loss of RCL Eq. 14–18 over all (or a random
    ``ratio`` of the) negatives of the batch in both directions, on the matching probabilities of
    Eq. 1–2 with temperature ``tau``. ``loss`` picks the variant (``log`` by default, as the
    paper's experiments; ``mae``, ``exp``, ``gce`` with ``q``, ``tan``) or one of the Table 7
    ablations (``tr``, ``tr-hn``, ``cl``, ``nl``).
    """

    name = "rcl"

    @dataclass
    class Options:
        loss: str = "log"
        tau: float = 0.05
        q: float = 0.5
        ratio: float = 1.0
        margin: float = 0.2

        def __post_init__(self) -> None:
            known = COMPLEMENTARY_KINDS + ABLATION_LOSSES
            if self.loss.lower() not in known:
                raise ConfigError(f"method.loss: one of {', '.join(known)}, got {self.loss!r}")
            if not 0 < self.ratio <= 1:
                raise ConfigError(f"method.ratio: in (0, 1], got {self.ratio}")
            if not 0 < self.q <= 1:
                raise ConfigError(f"method.q: in (0, 1] (RCL Eq. 17), got {self.q}")
            if not self.tau > 0:
                raise ConfigError(f"method.tau: must be > 0, got {self.tau}")

    def train_step(self, batch: Batch, epoch: int) -> Update:
        opts = self.options
        generator = torch.Generator(device=batch.images.device)
        generator.manual_seed(child_seed(epoch, "batch labels", int(batch.index[0])))
        sims = self.models[0](batch.images, batch.tokens, batch.lengths)
        if opts.loss.lower() in COMPLEMENTARY_KINDS:
            loss = complementary_loss(
                sims, kind=opts.loss.lower(), tau=opts.tau, q=opts.q, ratio=opts.ratio, generator=generator
            )
        else:
            loss = rcl_ablation_loss(sims, opts.loss, margin=opts.margin, tau=opts.tau, generator=generator)
        return Update({f"rcl_{opts.loss.lower()}": reduce_batch(loss, "mean")})

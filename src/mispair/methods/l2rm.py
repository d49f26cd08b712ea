"""``l2rm``: Learning to Rematch Mismatched Pairs (Han et al., CVPR 2024).

One model. After ``warmup_epochs`` on all pairs (InfoNCE + reverse cross-entropy, Eq. 3 + Eq. 5),
every epoch (Algorithm 1):

1. **division** (§4.1): per-sample triplet losses of every pair → min–max normalised → a beta
   mixture; pair ``i`` is *mismatched* when its posterior ``w_i`` of the higher-mean component
   exceeds ``threshold`` (0.5);
2. one pass over the matched pairs; each step (a :class:`RematchItem`) also takes a batch of
   mismatched pairs (cycled) and
   - **cost function** (Eq. 6): reconstructs pairs from the matched batch's captions and the
     mismatched batch's images (:func:`reconstruct_pairs`) and takes one Adam step of its own
     (lr ``cost_lr``) on ``⟨π^sup, f_c(S)⟩`` — the first :class:`~mispair.methods.base.Update`
     of the step, which the trainer applies before the rest of the step is computed;
   - **rematching** (Eq. 7–9, Appendix B): the refined alignment ``π̃`` of the mismatched batch is
     the entropic partial transport of mass ``ρ`` between uniform marginals, under the cost
     ``f_c(S)`` with the given pairs masked (Eq. 8), from the shared solver
     :func:`mispair.ot.sinkhorn`; it is the target of the rematch loss (Eq. 10,
     :func:`mispair.losses.rematch.rematch_loss`);
   - **matched pairs**: hardest-negative triplet loss, margin α (Eq. 2); objective Eq. 11.

Table 3's ablations are options: ``partial=false`` (full OT), ``mask_positives=false``,
``cost=cosine`` (``1 − S``), ``rematch=kl`` / ``infonce``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from mispair.data.batching import Batch
from mispair.division import fit_bmm
from mispair.division.scores import division_log
from mispair.encoding import evaluating
from mispair.errors import ConfigError
from mispair.losses import (
    PairLoss,
    info_nce_loss,
    mean_hinge_loss,
    reduce_batch,
    reverse_cross_entropy,
    soft_pair_loss,
    triplet_loss,
)
from mispair.losses.rematch import rematch_loss
from mispair.methods.base import Recipe, StepResult, Update, Warmup, register_recipe
from mispair.methods.scoring import clean_probability, division_losses
from mispair.nn.cost_function import cosine_cost, cost_drift, create_cost_function
from mispair.ot import positive_pair_mask, sinkhorn
from mispair.seeds import child_seed

COST_OPTIMIZER = "cost"
"""The name of L2RM's cost-function optimizer in :meth:`L2RM.optimizers` and its updates."""


@dataclass(frozen=True)
class RematchItem:
    """One L2RM step after the warm-up (Algorithm 1's inner loop).

    Attributes:
        matched: a batch of ``B`` matched pairs.
        mismatched: a batch of ``n`` mismatched pairs (cycled), None when there are none.
        recon: ``[n, K, D]`` reconstructed images (:func:`reconstruct_pairs`), None with
            ``mismatched``.
        supervision: ``[n, B]`` their matching matrix ``π^sup`` with ``matched``'s captions.
    """

    matched: Batch
    mismatched: Batch | None = None
    recon: Tensor | None = None
    supervision: Tensor | None = None

    def to(self, device: torch.device | str) -> RematchItem:
        def move(x: Any) -> Any:
            return None if x is None else x.to(device)

        return replace(
            self,
            matched=self.matched.to(device),
            mismatched=move(self.mismatched),
            recon=move(self.recon),
            supervision=move(self.supervision),
        )


def reconstruct_pairs(
    images: Tensor, pool: Tensor, max_fraction: float, rng: np.random.Generator
) -> tuple[Tensor, Tensor]:
    """Reconstructed pairs for the cost function and their matching matrix (L2RM §4.2, Fig. 2).

    ``k`` matched images (``k`` uniform in ``1..max(1, ⌊max_fraction · n⌋)``, as the reference's
    ``randint(1, 0.1 B)``) are kept for ``k`` random captions of the matched batch and put at
    ``k`` random slots of a batch of ``pool`` images (from the mismatched subset); every other
    slot keeps its pool image. ``π^sup[slot, caption] = 1`` for the kept pairs, 0 elsewhere.

    Args:
        images: ``[n, K, D]`` images of the matched batch (image ``j`` belongs to caption ``j``).
        pool: ``[n_pool, K, D]`` substitute images.
        max_fraction: upper bound of ``k / n``.
        rng: random source.

    Returns:
        ``(recon [n_pool, K, D], supervision [n_pool, n])``; score ``recon`` against the matched
        batch's captions.
    """
    n, n_pool = images.shape[0], pool.shape[0]
    k = int(rng.integers(1, max(1, int(max_fraction * n)) + 1))
    k = min(k, n, n_pool)
    captions = torch.from_numpy(rng.permutation(n)[:k])
    slots = torch.from_numpy(rng.permutation(n_pool)[:k])
    recon = pool.clone()
    recon[slots] = images[captions]
    supervision = torch.zeros(n_pool, n, dtype=images.dtype)
    supervision[slots, captions] = 1.0
    return recon, supervision


@torch.no_grad()
def refined_alignment(
    cost: Tensor,
    reg: float,
    *,
    mass: float | None = 0.1,
    mask_positives: bool = True,
    dummy_margin: float = 1.0,
    n_iter: int = 1000,
    tol: float | None = 1e-5,
) -> Tensor:
    """The refined alignment ``π̃`` of a mismatched batch, L2RM Eq. 7–9 (Appendix B).

    Entropic OT (regularisation λ = ``reg``) between uniform marginals ``1/n`` under ``cost``,
    moving only ``mass`` = ρ units (Eq. 7, solved on the dummy-point extension of Eq. 12–14 with
    ``A = max C + dummy_margin``; ``None`` = full OT, Eq. 1) and, with ``mask_positives``, none
    between the two halves of a given pair (Eq. 8), by :func:`mispair.ot.sinkhorn`.

    Args:
        cost: ``[n, n]`` transport costs ``f_c(S)``.
        reg: λ.
        mass: ρ ≤ 1, or None for full transport.
        mask_positives: forbid the diagonal.
        dummy_margin: ``A − max C`` (the reference code uses 0).
        n_iter, tol: Sinkhorn's iteration budget and marginal tolerance.

    Returns:
        ``[n, n]`` plan: row sums ≤ 1/n, column sums ≤ 1/n, total ρ (1 for full OT), zero
        diagonal when masked.
    """
    n = cost.shape[0]
    mask = positive_pair_mask(n, device=cost.device) if mask_positives and n > 1 else None
    big = None
    if mass is not None:
        big = float((cost if mask is None else cost[mask]).max()) + dummy_margin
    result = sinkhorn(
        cost[None], None, None, reg, mask=mask, partial_mass=mass, n_iter=n_iter, tol=tol, big=big
    )
    return result.plan[0]


@register_recipe
class L2RM(Recipe):
    """L2RM on one model; see the module docstring for the algorithm.

    Options (paper values in brackets):

    - ``warmup_epochs`` (Table 5: 5 F30K, 10 COCO/CC152K); ``warmup_loss``: ``infonce_rce``
      (Eq. 3 + 5, Algorithm 1), ``infonce`` (Eq. 3), ``triplet`` (hinge averaged over the
      negatives, summed over the batch: the reference's commented-out warm-up) or
      ``triplet_hardest`` (Eq. 2; Table 4's "triplet"); ``tau`` τ [0.05]; ``rce_eps`` ε [1e-7].
    - ``division_loss``: ``mean`` (hinges averaged over the batch, the reference's
      ``eval_loss``) or ``hardest`` (Eq. 2 as Eq. 4 writes it); ``threshold`` on ``w_i`` [0.5].
      A division that leaves fewer than two matched pairs (a collapsed mixture) is not used: the
      previous one is kept (or the warm-up goes on) and ``division/kept_previous`` logged.
    - ``cost``: ``exchangeable`` (default; §4.2's "single-layer feed-forward network" on the
      similarity matrix, restricted to the five weights that keep it order-equivariant),
      ``linear`` (the reference's ``Linear(B, B)``) or ``cosine`` (``1 − S``, Table 3 "w/o cost
      function"). ``cost_lr``: its own Adam learning rate, 1e-3 by default. D.1's 2e-6 is the
      reference's rate for its ``B² + B`` weights (``cost=linear cost_lr=2e-6`` reproduces it);
      at 2e-6 the five exchangeable weights stay within ~1e-3 of ``relu(1 − S)`` over a whole run,
      which is the fixed-cost ablation. At 1e-3 the cost drifts measurably (the log's
      ``cost/drift_mean`` after every epoch; 0.26 on Tux Paint at 40% noise, seed 0).
      ``cost_lr_decay_epochs``/``cost_lr_decay``: its own step schedule (D.1 states none; the
      reference decays it with the model's lr, as the shipped configs do).
      ``reconstruct_fraction`` [0.1], the largest share of kept matched images.
    - ``partial`` (Eq. 7; false = full OT), ``rho`` ρ [0.1 at batch 128; Table 9 scales it with
      the batch: ``rho_batch`` 128, 0 = no scaling], ``reg`` λ [0.01 F30K, 0.07 COCO/CC152K],
      ``mask_positives`` (Eq. 8; ``auto`` masks unless the run has no noise record, i.e. the
      split is taken as clean — D.1), ``dummy_margin`` (``A = max C + dummy_margin`` of Eq. 12;
      the reference uses 0), ``sinkhorn_iters``/``sinkhorn_tol``.
    - ``rematch``: ``sym_kl`` (Eq. 10), ``kl``, ``infonce`` (Table 3); ``rematch_reduction``:
      ``mean`` over the batch (the reference) or ``sum`` (Eq. 11 as written); ``margin`` α [0.2]
      of the matched pairs' hardest-negative triplet loss, summed over the batch.
    - ``loss``: the matched pairs' loss, ``triplet`` (Eq. 2, above) or ``infonce``: the plain
      cross-modal InfoNCE (Eq. 3) of each matched pair at temperature ``loss_tau`` (0.2, holdout's;
      ``tau`` stays the warm-up's and the rematch's), averaged over the batch. L2RM trusts its
      matched pairs fully (a hard split), so every weight is 1
      (:func:`~mispair.losses.soft_pair_loss` with ``α_i = α``); the division, the cost function
      and the rematch of the mismatched pairs are unchanged.
    """

    name = "l2rm"

    @dataclass
    class Options:
        warmup_epochs: int = 5
        warmup_loss: Literal["infonce_rce", "infonce", "triplet", "triplet_hardest"] = "infonce_rce"
        tau: float = 0.05
        rce_eps: float = 1e-7
        margin: float = 0.2
        division_loss: Literal["mean", "hardest"] = "mean"
        threshold: float = 0.5
        cost: Literal["exchangeable", "linear", "cosine"] = "exchangeable"
        cost_lr: float = 1e-3
        cost_lr_decay_epochs: list[int] = field(default_factory=list)
        cost_lr_decay: float = 0.1
        reconstruct_fraction: float = 0.1
        partial: bool = True
        rho: float = 0.1
        rho_batch: int = 128
        reg: float = 0.07
        mask_positives: bool | Literal["auto"] = "auto"
        dummy_margin: float = 1.0
        sinkhorn_iters: int = 1000
        sinkhorn_tol: float = 1e-5
        rematch: Literal["sym_kl", "kl", "infonce"] = "sym_kl"
        rematch_reduction: Literal["mean", "sum"] = "mean"
        loss: PairLoss = "triplet"
        loss_tau: float = 0.2

        def __post_init__(self) -> None:
            if not 0 < self.rho <= 1 or not self.reg > 0:
                raise ConfigError(
                    f"method: need 0 < rho <= 1 and reg > 0, got rho={self.rho}, reg={self.reg}"
                )

    def __init__(self, models, options, context) -> None:
        super().__init__(models, options, context)
        self.cost_fn = create_cost_function(options.cost, context.batch_size)
        self.cost_optimizer = None
        if self.cost_fn is not None:
            self.cost_fn.to(context.device)
            self.cost_optimizer = torch.optim.Adam(self.cost_fn.parameters(), lr=options.cost_lr)
        self.clean_prob: np.ndarray | None = None  # [n_pairs] from the last division

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """The cost function's own Adam (none for ``cost=cosine``), stepped by the trainer."""
        return {} if self.cost_optimizer is None else {COST_OPTIMIZER: self.cost_optimizer}

    # ---------------------------------------------------------------- division
    def begin_epoch(self, epoch: int) -> dict[str, float]:
        opts, ctx = self.options, self.context
        if self.cost_optimizer is not None:
            factor = opts.cost_lr_decay ** sum(epoch >= e for e in opts.cost_lr_decay_epochs)
            for group in self.cost_optimizer.param_groups:
                group["lr"] = opts.cost_lr * factor
        if epoch < opts.warmup_epochs:
            return {}
        seed = child_seed(ctx.seed, "division", epoch)
        losses = division_losses(
            self.models, ctx, batch_size=ctx.batch_size, seed=seed, loss_fn=self.division_loss
        )
        clean_prob = clean_probability(losses[:1], fit_bmm, ctx)[0]
        if (1 - clean_prob <= opts.threshold).sum() < 2:
            # Nothing left to train on: keep the previous division (before the first, the warm-up goes on).
            previous = self.clean_prob if self.clean_prob is not None else np.ones_like(clean_prob)
            return {**division_log(previous, ctx.is_noisy, 1 - opts.threshold), "division/kept_previous": 1.0}
        self.clean_prob = clean_prob
        return division_log(self.clean_prob, ctx.is_noisy, 1 - opts.threshold)

    def end_epoch(self, epoch: int) -> dict[str, float]:
        """The learned cost's drift from ``relu(1 − S)`` (:func:`cost_drift`), logged every epoch."""
        return {} if self.cost_fn is None else cost_drift(self.cost_fn, self.context.batch_size)

    def division_loss(self, sims: Tensor) -> Tensor:
        """Per-sample loss the division fits (Eq. 4)."""
        if self.options.division_loss == "hardest":
            return triplet_loss(sims, self.options.margin, negatives="hardest")
        return mean_hinge_loss(sims, self.options.margin)

    def matched(self) -> np.ndarray:
        """``[n_pairs]`` bool: ``w_i = 1 − clean_prob ≤ threshold`` (Algorithm 1's ``D_m``)."""
        return 1 - self.clean_prob <= self.options.threshold

    # ---------------------------------------------------------------- batches
    def epoch_batches(self, epoch: int, seed: int) -> Iterator[Warmup | RematchItem]:
        """:class:`Warmup` items on all pairs until there is a division, then a
        :class:`RematchItem` per matched batch."""
        train, size = self.context.train, self.context.batch_size
        if epoch < self.options.warmup_epochs or self.clean_prob is None:
            for batch in train.batches(size, seed=seed):
                yield Warmup(batch)
            return
        matched = self.matched()
        noisy_seed = child_seed(seed, "noisy batches")
        noisy = train.cycled_batches(size, seed=noisy_seed, subset=np.flatnonzero(~matched))
        rng = np.random.default_rng(self.context.shard.salt(seed, 2))
        for batch in train.batches(size, seed=seed, subset=np.flatnonzero(matched)):
            mismatched = next(noisy)
            if mismatched is None:
                yield RematchItem(batch)
                continue
            fraction = self.options.reconstruct_fraction
            recon, supervision = reconstruct_pairs(batch.images, mismatched.images, fraction, rng)
            yield RematchItem(batch, mismatched, recon, supervision)

    def n_steps(self, epoch: int) -> int | None:
        train, size = self.context.train, self.context.batch_size
        if epoch < self.options.warmup_epochs or self.clean_prob is None:
            return train.n_batches(size)
        return train.n_batches(size, int(self.matched().sum()))

    # ---------------------------------------------------------------- steps
    def train_step(self, item: Warmup | RematchItem, epoch: int) -> StepResult:
        """A warm-up :class:`Update`, or the generator :meth:`rematch_updates`."""
        if isinstance(item, Warmup):
            return Update({f"warmup_{self.options.warmup_loss}": self.warmup_loss(item.batch)})
        return self.rematch_updates(item)

    def rematch_updates(self, item: RematchItem) -> Iterator[Update]:
        """The cost function's update (Eq. 6; when it is learned and there are mismatched pairs),
        then — computed only once the trainer has stepped it, so that ``π̃`` uses the updated
        cost — the model's update: ``triplet`` of the matched pairs (Eq. 2) and ``rematch`` of
        the mismatched ones (Eq. 10)."""
        if item.recon is not None and self.cost_fn is not None:
            yield self.update_cost(item.matched, item.recon, item.supervision)
        yield Update(self.model_terms(item.matched, item.mismatched))

    def model_terms(self, matched: Batch, mismatched: Batch | None) -> dict[str, Tensor]:
        """``triplet`` (hardest negative, summed) or ``infonce`` (averaged) of the matched pairs
        (``loss``) and, for two or more mismatched pairs,
        ``rematch`` against the refined alignment of their detached similarities."""
        model, opts = self.models[0], self.options
        sims = model(matched.images, matched.tokens, matched.lengths)
        matched = soft_pair_loss(sims, opts.margin, loss=opts.loss, margin=opts.margin, tau=opts.loss_tau)
        terms = {opts.loss: reduce_batch(matched, "sum" if opts.loss == "triplet" else "mean")}
        if mismatched is not None and len(mismatched) > 1:
            sims_n = model(mismatched.images, mismatched.tokens, mismatched.lengths)
            plan = self.refined_alignment(sims_n.detach())
            loss = rematch_loss(sims_n, plan, opts.tau, kind=opts.rematch)
            terms["rematch"] = reduce_batch(loss, opts.rematch_reduction)
        return terms

    def warmup_loss(self, batch: Batch) -> Tensor:
        """Warm-up on all pairs: Eq. 3 + Eq. 5 (default), Eq. 3, or a triplet loss."""
        opts = self.options
        sims = self.models[0](batch.images, batch.tokens, batch.lengths)
        if opts.warmup_loss == "triplet":
            return reduce_batch(mean_hinge_loss(sims, opts.margin), "sum")
        if opts.warmup_loss == "triplet_hardest":
            return reduce_batch(triplet_loss(sims, opts.margin, negatives="hardest"), "sum")
        loss = info_nce_loss(sims, opts.tau)
        if opts.warmup_loss == "infonce_rce":
            loss = loss + reverse_cross_entropy(sims, opts.tau, opts.rce_eps)
        return reduce_batch(loss, "mean")

    def update_cost(self, matched: Batch, recon: Tensor, supervision: Tensor) -> Update:
        """The cost function's update on Eq. 6, ``cost_ot = ⟨π^sup, f_c(g(V', T))⟩``.

        ``recon [n, K, D]`` is scored against ``matched``'s ``B`` captions by the model in eval
        mode without gradient, so the loss trains only ``f_c`` (through :data:`COST_OPTIMIZER`);
        ``supervision`` is ``[n, B]``.
        """
        model = self.models[0]
        with evaluating(model), torch.no_grad():
            sims = model(recon, matched.tokens, matched.lengths)
        loss = (supervision.to(sims.dtype) * self.cost_fn(sims)).sum()
        return Update({"cost_ot": loss}, COST_OPTIMIZER)

    @torch.no_grad()
    def cost(self, sims: Tensor) -> Tensor:
        """Transport cost ``f_c(S)`` of a batch (``1 − S`` for ``cost=cosine``)."""
        return cosine_cost(sims) if self.cost_fn is None else self.cost_fn(sims)

    def refined_alignment(self, sims: Tensor) -> Tensor:
        """``π̃ [n, n]`` of a mismatched batch from its (detached) similarities."""
        opts = self.options
        n = sims.shape[0]
        mass = None
        if opts.partial:
            mass = min(1.0, opts.rho * n / opts.rho_batch if opts.rho_batch else opts.rho)
        return refined_alignment(
            self.cost(sims),
            opts.reg,
            mass=mass,
            mask_positives=self.mask_positives(),
            dummy_margin=opts.dummy_margin,
            n_iter=opts.sinkhorn_iters,
            tol=opts.sinkhorn_tol,
        )

    def mask_positives(self) -> bool:
        """Eq. 8's mask: on, off, or ``auto`` — off when the split is taken as clean (D.1)."""
        if self.options.mask_positives == "auto":
            return self.context.noise is not None
        return bool(self.options.mask_positives)

    # ---------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        if self.clean_prob is not None:
            state["clean_prob"] = torch.as_tensor(self.clean_prob)
        if self.cost_fn is not None:
            state["cost_fn"] = self.cost_fn.state_dict()
            state["cost_optimizer"] = self.cost_optimizer.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "clean_prob" in state:
            self.clean_prob = np.asarray(state["clean_prob"].cpu().numpy(), dtype=np.float64)
        if self.cost_fn is not None and "cost_fn" in state:
            self.cost_fn.load_state_dict(state["cost_fn"])
            self.cost_optimizer.load_state_dict(state["cost_optimizer"])

    def export_scores(self) -> dict[str, np.ndarray]:
        return {} if self.clean_prob is None else {"clean_prob": self.clean_prob}

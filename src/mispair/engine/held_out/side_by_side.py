"""Many out-of-fold scorers of a linear model trained side by side, one batched step for all.

The audit's held-out division trains ``folds × repeats`` scorers per round (15 by default), each a
``vse`` run with InfoNCE on the pretrained backbone: two linear maps, of the mean image feature and
of the frozen caption vector (MiniLM's mean state, or a vector given with the collection), scored
by the cosine. One such step is a few small matrix products; trained one scorer at a time through
the generic :class:`~mispair.engine.trainer.Trainer`, most of its time went to the framework
around them (tokens padded and looked up, autograd and Adam on each scorer's four tensors apart).

:func:`train_side_by_side` trains every scorer of a round at once: their weights stacked
(``[S, D, E]``), each step one batched product per modality over the ``S`` scorers' own batches,
their InfoNCE losses summed (the scorers share no parameter, so each gets its own gradient), each
scorer's gradient clipped by its own norm and Adam applied per scorer (its own step count and
learning rate). Each scorer sees exactly the batches, initial weights, clipping and Adam updates
it would see alone (:func:`~mispair.engine.held_out.scorers.train_scorer`), so its weights and held-out
scores agree with the sequential ones to float rounding (``tests/engine/test_side_by_side.py``).
The step keeps its gradients across steps (autograd stops at the linear maps' outputs; the
weights' gradients are written in place) and updates every row in one Adam call when all share a
step count and learning rate: bitwise the weights of autograd and a per-row Adam, a third faster
(``benchmarks/results/bench_audit_scale.md``).

The scorers of a round finish together: an audit interrupted during a round's training trains
that round's scorers again on resume (trained one by one, the scorers finished before the
interruption were kept); the finished rounds and scored scorers are kept as before.

Models it does not cover (another head, recipe or loss, fragments, a trainable text encoder,
AdamW) are trained one by one as before: :func:`side_by_side_spec` says which.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mispair.config import RunConfig
from mispair.data.batching import TrainingPairs, batch_indices
from mispair.data.content import pooled
from mispair.errors import DivergedError
from mispair.methods.base import build_options, get_recipe
from mispair.nn.embedding import l2_normalize
from mispair.nn.linear_backbone import LINEAR_WEIGHTS, is_linear_backbone
from mispair.nn.model import RetrievalModel
from mispair.seeds import child_seed

ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8
"""``torch.optim.Adam``'s defaults, which the trainer uses."""


@dataclass(frozen=True)
class ScorerJob:
    """One scorer: ``pairs [n]`` the indices (into the training pairs) of the pairs it trains on,
    ``seed`` its run seed (its batches are shuffled as the trainer shuffles that run's), ``start``
    its initial weights (a state dict holding :data:`LINEAR_WEIGHTS`)."""

    pairs: np.ndarray
    seed: int
    start: dict[str, Tensor]


@dataclass(frozen=True)
class SideBySideSpec:
    """What a scorer run trains with: InfoNCE temperature ``tau``, ``batch_size``, ``epochs``,
    base ``lr`` and its decay (``lr_decay`` at each of ``lr_decay_epochs``), ``grad_clip`` (0:
    none) and Adam's L2 ``weight_decay``."""

    tau: float
    batch_size: int
    epochs: int
    lr: float
    lr_decay: float
    lr_decay_epochs: tuple[int, ...]
    grad_clip: float
    weight_decay: float

    def lr_at(self, epoch: int) -> float:
        """The trainer's learning rate of ``epoch``."""
        return self.lr * self.lr_decay ** sum(epoch >= e for e in self.lr_decay_epochs)


def side_by_side_spec(config: RunConfig, model: RetrievalModel) -> SideBySideSpec | None:
    """The spec of ``config``'s scorer runs when :func:`train_side_by_side` trains them exactly as
    the trainer would, else None: a recipe that can be trained ``side_by_side`` (``vse``) with
    InfoNCE averaged over the batch, Adam,
    the ``cosine`` head on the projected mean image feature (no MLP) and a frozen per-caption text
    vector (a text encoder that ``reads_caption_vectors``), and no other trainable tensor."""
    recipe = get_recipe(config.recipe)
    if not recipe.side_by_side or recipe.n_models != 1 or config.train.optimizer != "adam":
        return None
    options = build_options(recipe, config.method)
    if options.loss != "infonce" or options.reduction != "mean":
        return None
    if not is_linear_backbone(model):
        return None
    train = config.train
    return SideBySideSpec(
        tau=options.tau,
        batch_size=train.batch_size,
        epochs=train.epochs,
        lr=train.lr,
        lr_decay=train.lr_decay,
        lr_decay_epochs=tuple(train.lr_decay_epochs),
        grad_clip=train.grad_clip,
        weight_decay=train.weight_decay,
    )


@dataclass(frozen=True)
class LinearInputs:
    """What the linear maps read: ``images [n_images, D]`` the mean feature of each image,
    ``captions [m, H]`` caption vectors, of which pair ``k`` reads row ``caption_rows[k]``
    (``[n_pairs]``), ``image_of_caption [n_pairs]``."""

    images: Tensor
    captions: Tensor
    caption_rows: Tensor
    image_of_caption: Tensor

    @staticmethod
    def of(model: RetrievalModel, train: TrainingPairs, device: torch.device) -> LinearInputs:
        """The inputs of ``train`` for ``model``, on ``device``: its text encoder's
        ``caption_table`` where it has one (the table it keeps, not a copy: a million MiniLM
        vectors are 1.5 GB), else its ``caption_vectors``; the image features are averaged a
        block at a time (a memory-mapped split is never read whole)."""
        images = pooled(train.pairs.images, unit=False)
        encoder = model.text_encoder
        if hasattr(encoder, "caption_table"):
            captions, rows = encoder.caption_table(train.tokens)
        else:
            captions = encoder.caption_vectors(train.tokens)
            rows = torch.arange(len(captions))
        return LinearInputs(
            torch.from_numpy(images).to(device),
            captions.to(device=device, dtype=torch.float32),
            rows.to(device),
            torch.from_numpy(train.image_of_caption).to(device),
        )


def batch_schedule(job: ScorerJob, spec: SideBySideSpec) -> list[tuple[np.ndarray, int]]:
    """``(pair indices, epoch)`` of every step of ``job``'s run, in order: each epoch's batches
    shuffled as the trainer's epoch seed shuffles them (:func:`~mispair.data.batching.batch_indices`)."""
    return [
        (batch, epoch)
        for epoch in range(spec.epochs)
        for batch in batch_indices(job.pairs, spec.batch_size, seed=child_seed(job.seed, "epoch", epoch))
    ]


def batched_info_nce(image_side: Tensor, text_side: Tensor, tau: float) -> Tensor:
    """``[G]``: each scorer's InfoNCE averaged over its batch (the ``vse`` recipe's loss) of its
    image and caption embeddings ``[G, B, E]`` (cosine head: both L2-normalised)."""
    sims = l2_normalize(image_side) @ l2_normalize(text_side).transpose(1, 2)
    logits = sims / tau
    i2t = -torch.log_softmax(logits, dim=2).diagonal(dim1=1, dim2=2)
    t2i = -torch.log_softmax(logits, dim=1).diagonal(dim1=1, dim2=2)
    return (i2t + t2i).mean(dim=1)


class StackedAdam:
    """``torch.optim.Adam`` (L2 weight decay, no AMSGrad) over tensors ``[S, ...]`` whose rows are
    ``S`` separate models, with their gradients ``grads`` (same shapes): each row has its own step
    count and learning rate, and a step updates the chosen rows only. Adam is elementwise, so rows
    at one step count and learning rate are updated by PyTorch's fused kernel in one pass over the
    whole tensors when they are every row (the usual step), else one row at a time, each row one
    tensor of the kernel (as the trainer's optimizer over each model's own tensors)."""

    def __init__(self, params: list[Tensor], grads: list[Tensor], weight_decay: float) -> None:
        self.params, self.grads = params, grads
        self.weight_decay = weight_decay
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]
        self.steps = [torch.zeros((), dtype=torch.float32, device=params[0].device) for _ in params[0]]
        self.counts = np.zeros(len(params[0]), dtype=np.int64)

    @torch.no_grad()
    def step(self, rows: list[int], lrs: list[float]) -> None:
        """One update of the rows ``rows``, row ``rows[i]`` at learning rate ``lrs[i]``."""
        for lr in sorted(set(lrs)):
            chosen = [j for j, rate in zip(rows, lrs) if rate == lr]
            for j in chosen:
                self.steps[j] += 1
            self.counts[chosen] += 1
            if len(chosen) == len(self.counts) and (self.counts == self.counts[0]).all():
                tensors = [self.params, self.grads, self.m, self.v, [self.steps[0]] * len(self.params)]
            else:
                tensors = self._rows(chosen)
            torch._fused_adam_(
                *tensors[:4],
                [],
                tensors[4],
                lr=lr,
                beta1=ADAM_BETAS[0],
                beta2=ADAM_BETAS[1],
                weight_decay=self.weight_decay,
                eps=ADAM_EPS,
                amsgrad=False,
                maximize=False,
            )

    def _rows(self, chosen: list[int]) -> list[list[Tensor]]:
        """The rows ``chosen`` of the params, grads, moments and step counts, one tensor a row."""
        views = [
            (p[j], g[j], m[j], v[j], self.steps[j])
            for p, g, m, v in zip(self.params, self.grads, self.m, self.v)
            for j in chosen
        ]
        return [list(column) for column in zip(*views)]


@torch.no_grad()
def clip_rows(grads: list[Tensor], max_norm: float) -> None:
    """``clip_grad_norm_`` of each row's gradient (its slices of every tensor of ``grads``
    together), in place."""
    norms = torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads], dim=1), dim=1
    )
    scale = torch.clamp(max_norm / (norms + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale.view((-1,) + (1,) * (g.dim() - 1)))


@dataclass(frozen=True)
class GroupStep:
    """One step of the scorers ``rows [G]`` whose batches have one size: what their linear maps
    read, ``images [G, B, D]`` and ``captions [G, B, H]``, and their outputs ``image_side`` and
    ``text_side [G, B, E]`` (the autograd leaves of the loss)."""

    rows: Tensor
    images: Tensor
    captions: Tensor
    image_side: Tensor
    text_side: Tensor


def train_side_by_side(
    jobs: list[ScorerJob], inputs: LinearInputs, spec: SideBySideSpec, device: torch.device
) -> list[dict[str, Tensor]]:
    """The trained weights (:data:`LINEAR_WEIGHTS`, on the CPU) of every scorer of ``jobs``, all
    trained at once (module docstring): step ``t`` trains every scorer with a ``t``-th step
    (scorers with fewer pairs finish earlier), grouping those whose batches have one size.
    Autograd runs from the loss to the linear maps' outputs only; their weights' gradients are
    the products its ``baddbmm`` backward computes, written into gradients allocated once (a
    fresh ``[S, D, E]`` gradient each step cost a page fault per 4 KiB of it)."""
    params = [  # weights as [S, in, out], a Linear's transposed: the batched products run 2.5× faster
        torch.stack([_input_major(job.start[name].detach().float()) for job in jobs]).to(device)
        for name in LINEAR_WEIGHTS
    ]
    grads = [torch.zeros_like(p) for p in params]
    optimizer = StackedAdam(params, grads, spec.weight_decay)
    schedules = [batch_schedule(job, spec) for job in jobs]
    for t in range(max(len(s) for s in schedules)):
        active = [j for j, s in enumerate(schedules) if t < len(s)]
        sizes = sorted({len(schedules[j][t][0]) for j in active})
        groups = [[j for j in active if len(schedules[j][t][0]) == size] for size in sizes]
        steps = [_group_step(params, [schedules[j][t][0] for j in g], g, inputs, device) for g in groups]
        _gradients(steps, params, grads, spec.tau)
        if spec.grad_clip > 0:  # the rows not trained this step hold stale gradients, never applied
            clip_rows(grads, spec.grad_clip)
        optimizer.step(active, [spec.lr_at(schedules[j][t][1]) for j in active])
    return [
        {name: _input_major(p[j]).cpu().clone() for name, p in zip(LINEAR_WEIGHTS, params)}
        for j in range(len(jobs))
    ]


def _input_major(tensor: Tensor) -> Tensor:
    """A Linear's weight ``[out, in]`` as ``[in, out]`` (and back), contiguous; a bias as it is."""
    return tensor.t().contiguous() if tensor.dim() == 2 else tensor


@torch.no_grad()
def _group_step(
    params: list[Tensor],
    batches: list[np.ndarray],
    group: list[int],
    inputs: LinearInputs,
    device: torch.device,
) -> GroupStep:
    """The forward pass of the scorers ``group`` on their ``batches`` (one size) up to the linear
    maps' outputs, which require a gradient."""
    pairs = torch.from_numpy(np.stack(batches)).to(device)  # [G, B]
    images = inputs.images[inputs.image_of_caption[pairs]]  # [G, B, D]
    captions = inputs.captions[inputs.caption_rows[pairs]]  # [G, B, H]
    rows = torch.tensor(group, device=device)
    whole = len(group) == len(params[0])
    w_image, b_image, w_text, b_text = (p if whole else p[rows] for p in params)
    image_side = torch.baddbmm(b_image[:, None, :], images, w_image).requires_grad_()
    text_side = torch.baddbmm(b_text[:, None, :], captions, w_text).requires_grad_()
    return GroupStep(rows, images, captions, image_side, text_side)


def _gradients(steps: list[GroupStep], params: list[Tensor], grads: list[Tensor], tau: float) -> None:
    """The gradients of the summed InfoNCE of every group of ``steps`` with respect to ``params``,
    written into the rows of ``grads`` the groups train (``baddbmm``'s backward: the weight's
    ``inputsᵀ @ ∂output``, the bias's ``∂output`` summed over the batch)."""
    with torch.enable_grad():
        loss = sum(
            batched_info_nce(l2_normalize(s.image_side), l2_normalize(s.text_side), tau).sum() for s in steps
        )
        if not torch.isfinite(loss):
            raise DivergedError(f"a scorer's training loss became {loss.item()}; lower train.lr")
        sides = torch.autograd.grad(loss, [side for s in steps for side in (s.image_side, s.text_side)])
    for s, d_image, d_text in zip(steps, sides[::2], sides[1::2], strict=True):
        if len(s.rows) == len(params[0]):  # every row: straight into the gradients, no copy
            torch.bmm(s.images.transpose(1, 2), d_image, out=grads[0])
            torch.sum(d_image, dim=1, out=grads[1])
            torch.bmm(s.captions.transpose(1, 2), d_text, out=grads[2])
            torch.sum(d_text, dim=1, out=grads[3])
        else:
            grads[0][s.rows] = torch.bmm(s.images.transpose(1, 2), d_image)
            grads[1][s.rows] = torch.sum(d_image, dim=1)
            grads[2][s.rows] = torch.bmm(s.captions.transpose(1, 2), d_text)
            grads[3][s.rows] = torch.sum(d_text, dim=1)

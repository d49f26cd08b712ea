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
    ``S`` separate models: each row has its own step count and learning rate, and a step updates
    the chosen rows only. Every row is one tensor of PyTorch's fused Adam kernel (one pass over
    it, as the trainer's optimizer over each model's own tensors)."""

    def __init__(self, params: list[Tensor], weight_decay: float) -> None:
        self.params = params
        self.weight_decay = weight_decay
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]
        self.steps = [torch.zeros((), dtype=torch.float32, device=params[0].device) for _ in params[0]]

    @torch.no_grad()
    def step(self, rows: list[int], lrs: list[float]) -> None:
        """One update of the rows ``rows``, row ``rows[i]`` at learning rate ``lrs[i]``."""
        for lr in sorted(set(lrs)):
            chosen = [j for j, rate in zip(rows, lrs) if rate == lr]
            for j in chosen:
                self.steps[j] += 1
            views = [
                (p.detach()[j], p.grad[j], m[j], v[j], self.steps[j])
                for p, m, v in zip(self.params, self.m, self.v)
                for j in chosen
            ]
            params, grads, first, second, steps = (list(column) for column in zip(*views))
            torch._fused_adam_(
                params,
                grads,
                first,
                second,
                [],
                steps,
                lr=lr,
                beta1=ADAM_BETAS[0],
                beta2=ADAM_BETAS[1],
                weight_decay=self.weight_decay,
                eps=ADAM_EPS,
                amsgrad=False,
                maximize=False,
            )


@torch.no_grad()
def clip_rows(params: list[Tensor], max_norm: float) -> None:
    """``clip_grad_norm_`` of each row's gradient (its slices of every tensor together)."""
    norms = torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(p.grad.flatten(1), dim=1) for p in params], dim=1), dim=1
    )
    scale = torch.clamp(max_norm / (norms + 1e-6), max=1.0)
    for p in params:
        p.grad.mul_(scale.view((-1,) + (1,) * (p.dim() - 1)))


def train_side_by_side(
    jobs: list[ScorerJob], inputs: LinearInputs, spec: SideBySideSpec, device: torch.device
) -> list[dict[str, Tensor]]:
    """The trained weights (:data:`LINEAR_WEIGHTS`, on the CPU) of every scorer of ``jobs``, all
    trained at once (module docstring): step ``t`` trains every scorer with a ``t``-th step
    (scorers with fewer pairs finish earlier), grouping those whose batches have one size."""
    params = [  # weights as [S, in, out], a Linear's transposed: the batched products run 2.5× faster
        torch.stack([_input_major(job.start[name].detach().float()) for job in jobs])
        .to(device)
        .requires_grad_()
        for name in LINEAR_WEIGHTS
    ]
    optimizer = StackedAdam(params, spec.weight_decay)
    schedules = [batch_schedule(job, spec) for job in jobs]
    for t in range(max(len(s) for s in schedules)):
        active = [j for j, s in enumerate(schedules) if t < len(s)]
        for p in params:
            p.grad = None
        sizes = sorted({len(schedules[j][t][0]) for j in active})
        groups = [[j for j in active if len(schedules[j][t][0]) == size] for size in sizes]
        loss = sum(
            _group_loss(params, [schedules[j][t][0] for j in g], g, inputs, spec, device) for g in groups
        )
        if not torch.isfinite(loss):
            raise DivergedError(f"a scorer's training loss became {loss.item()}; lower train.lr")
        loss.backward()
        if spec.grad_clip > 0:  # the rows not trained this step have no gradient to clip
            clip_rows(params, spec.grad_clip)
        optimizer.step(active, [spec.lr_at(schedules[j][t][1]) for j in active])
    return [
        {name: _input_major(p.detach()[j]).cpu().clone() for name, p in zip(LINEAR_WEIGHTS, params)}
        for j in range(len(jobs))
    ]


def _input_major(tensor: Tensor) -> Tensor:
    """A Linear's weight ``[out, in]`` as ``[in, out]`` (and back), contiguous; a bias as it is."""
    return tensor.t().contiguous() if tensor.dim() == 2 else tensor


def _group_loss(
    params: list[Tensor],
    batches: list[np.ndarray],
    group: list[int],
    inputs: LinearInputs,
    spec: SideBySideSpec,
    device: torch.device,
) -> Tensor:
    """The summed InfoNCE of the scorers ``group`` on their ``batches`` (one size)."""
    pairs = torch.from_numpy(np.stack(batches)).to(device)  # [G, B]
    images = inputs.images[inputs.image_of_caption[pairs]]  # [G, B, D]
    captions = inputs.captions[inputs.caption_rows[pairs]]  # [G, B, H]
    rows = torch.tensor(group, device=device)
    whole = len(group) == len(params[0])
    w_image, b_image, w_text, b_text = (p if whole else p[rows] for p in params)
    image_side = torch.baddbmm(b_image[:, None, :], images, w_image)
    text_side = torch.baddbmm(b_text[:, None, :], captions, w_text)
    return batched_info_nce(l2_normalize(image_side), l2_normalize(text_side), spec.tau).sum()

"""``omit``: OMIT's training (Pan et al., §3.3, §4.1) — any head, the omit head by default.

Hardest-negative triplet loss with margin φ = 0.05 (Eq. 6) after a first epoch of summed hinges
(VSE∞'s warm-up), on batches augmented as the paper does: a fraction of each image's fragments
dropped, caption words masked / replaced / discarded. The augmentations are seeded batch
transforms (the data layer is untouched).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mispair.data.batching import Batch
from mispair.errors import ConfigError
from mispair.losses import Reduction, reduce_batch, triplet_loss
from mispair.methods.base import Recipe, RecipeContext, Update, register_recipe
from mispair.nn.model import RetrievalModel


def drop_fragments(features: Tensor, ratio: float, generator: torch.Generator) -> Tensor:
    """Visual fragment masking: keep ``⌊K (1 − ratio)⌋`` (≥ 1) random fragments per image.

    As the reference's ``random_masking`` (MAE-style, same count for every image), the kept
    fragments in their original order. ``features [B, K, D] -> [B, K', D]``.
    """
    n, k = features.shape[:2]
    keep = max(1, int(k * (1 - ratio)))
    if ratio <= 0 or keep == k:
        return features
    noise = torch.rand(n, k, generator=generator).to(features.device)
    kept = noise.argsort(dim=1)[:, :keep].sort(dim=1).values
    return features.gather(1, kept[..., None].expand(-1, -1, features.shape[2]))


def corrupt_captions(
    tokens: Tensor,
    lengths: Tensor,
    rates: tuple[float, float, float],
    *,
    mask_token: int,
    vocabulary: Tensor,
    generator: torch.Generator,
) -> tuple[Tensor, Tensor]:
    """Caption token augmentation: each word is masked, replaced or discarded.

    Every word except the first and last token (``<start>``/``<end>``, ``[CLS]``/``[SEP]``) is,
    independently, replaced by ``mask_token`` with probability ``rates[0]``, by a random id of
    ``vocabulary`` with probability ``rates[1]``, or removed with probability ``rates[2]``
    (OMIT: 0.1, 0.02, 0.08; the reference draws 20 % of the words and splits them 50/10/40).
    Captions keep at least their two end tokens, so lengths stay ≥ 1.

    Args:
        tokens: ``[B, L]`` ids, 0-padded; lengths: ``[B]``.
        rates: (mask, replace, discard) probabilities.
        mask_token: the id written for masked words (``<unk>`` = 3 for the NCR vocabulary).
        vocabulary: ``[V]`` ids to draw replacements from.
        generator: CPU generator (the draws do not depend on the device).

    Returns:
        New ``tokens [B, L]`` (words moved left over the discarded ones) and ``lengths [B]``.
    """
    device = tokens.device
    n, width = tokens.shape
    lengths_cpu = lengths.cpu()
    u = torch.rand(n, width, generator=generator)
    picks = vocabulary[torch.randint(len(vocabulary), (n, width), generator=generator)]
    pos = torch.arange(width)
    inner = (pos[None] >= 1) & (pos[None] < lengths_cpu[:, None] - 1)
    p_mask, p_replace, p_discard = rates
    masked = inner & (u < p_mask)
    replaced = inner & (u >= p_mask) & (u < p_mask + p_replace)
    kept = ~(inner & (u >= p_mask + p_replace) & (u < p_mask + p_replace + p_discard))
    kept &= pos[None] < lengths_cpu[:, None]
    out = tokens.cpu().clone()
    out[masked] = mask_token
    out[replaced] = picks[replaced]
    target = kept.long().cumsum(1) - 1  # new position of each kept token
    new = torch.zeros_like(out)
    rows = torch.arange(n)[:, None].expand(n, width)
    new[rows[kept], target[kept]] = out[kept]
    return new.to(device), kept.sum(1).to(lengths.dtype).to(device)


def word_ids(token_lists: list[list[int]]) -> Tensor:
    """The distinct ids found between the end tokens of the training captions (≥ 1 id)."""
    inner = itertools.chain.from_iterable(t[1:-1] for t in token_lists)
    ids = np.unique(np.fromiter(inner, dtype=np.int64))
    return torch.from_numpy(ids if len(ids) else np.array([3], dtype=np.int64))


@register_recipe
class OMIT(Recipe):
    """OMIT's objective and augmentations around any similarity head (config ``model.head``).

    Options: ``margin`` φ (0.05), ``warmup_epochs`` without hardest negatives (1),
    ``visual_mask`` fraction of fragments dropped (0.4 for regions, 0.2 for grids; 0 for heads
    that need a fixed fragment count, e.g. SGR/SAF), ``caption_mask`` / ``caption_replace`` /
    ``caption_discard`` word rates (0.1 / 0.02 / 0.08), ``mask_token`` (3 = ``<unk>``; 103 =
    ``[MASK]`` for MiniLM), ``reduction`` of the triplet loss over the batch (``mean``; OMIT
    Eq. 6 sums: ``sum``).
    """

    name = "omit"

    @dataclass
    class Options:
        margin: float = 0.05
        warmup_epochs: int = 1
        visual_mask: float = 0.4
        caption_mask: float = 0.1
        caption_replace: float = 0.02
        caption_discard: float = 0.08
        mask_token: int = 3
        reduction: Reduction = "mean"

        def __post_init__(self) -> None:
            words = (self.caption_mask, self.caption_replace, self.caption_discard)
            if not all(0 <= r < 1 for r in (self.visual_mask, *words)) or sum(words) > 1:
                raise ConfigError(
                    "method: augmentation rates must be in [0, 1) and the three "
                    "caption rates sum to at most 1"
                )

    def __init__(self, models: list[RetrievalModel], options: Options, context: RecipeContext):
        super().__init__(models, options, context)
        self.vocabulary = word_ids(context.train.tokens)
        self.step = 0

    def begin_epoch(self, epoch: int) -> dict[str, float]:
        self.step = 0
        return {}

    def augment(self, batch: Batch, epoch: int) -> tuple[Tensor, Tensor, Tensor]:
        """Augmented ``(images, tokens, lengths)``, seeded by (run seed, epoch, step) and, on the
        ranks after the first of a multi-process run, the rank."""
        opts = self.options
        words = self.context.shard.salt(self.context.seed, epoch, self.step)
        seed = np.random.SeedSequence(words).generate_state(1)
        gen = torch.Generator().manual_seed(int(seed[0]))
        self.step += 1
        images = drop_fragments(batch.images, opts.visual_mask, gen)
        rates = (opts.caption_mask, opts.caption_replace, opts.caption_discard)
        tokens, lengths = corrupt_captions(
            batch.tokens,
            batch.lengths,
            rates,
            mask_token=opts.mask_token,
            vocabulary=self.vocabulary,
            generator=gen,
        )
        return images, tokens, lengths

    def train_step(self, batch: Batch, epoch: int) -> Update:
        images, tokens, lengths = self.augment(batch, epoch)
        sims = self.models[0](images, tokens, lengths)
        hardest = epoch >= self.options.warmup_epochs
        loss = triplet_loss(sims, self.options.margin, negatives="hardest" if hardest else "sum")
        return Update({"triplet": reduce_batch(loss, self.options.reduction)})

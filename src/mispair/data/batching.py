"""Batches of image–caption pairs as tensors."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mispair.data.mapped import rows
from mispair.data.pairset import PairSet, concatenate
from mispair.data.text_vectors import vector_tokens
from mispair.data.tokenizers import Tokenizer, shared_ids
from mispair.distributed import SINGLE_PROCESS, Shard
from mispair.seeds import child_seed


@dataclass
class Batch:
    """A batch of training pairs (caption ``index[b]`` paired with image ``image_index[b]``).

    Attributes:
        images: ``[B, K, D]`` float32 fragment features.
        tokens: ``[B, L]`` long token ids, 0-padded; lengths: ``[B]`` long.
        index: ``[B]`` long, the caption (= pair) indices in the training set.
        image_index: ``[B]`` long, the (possibly noisy) paired image of each caption.
    """

    images: Tensor
    tokens: Tensor
    lengths: Tensor
    index: Tensor
    image_index: Tensor

    def to(self, device: torch.device | str) -> Batch:
        return Batch(
            *(t.to(device) for t in (self.images, self.tokens, self.lengths, self.index, self.image_index))
        )

    def __len__(self) -> int:
        return self.index.shape[0]


def encode_captions(pairs: PairSet, tokenizer: Tokenizer | None) -> list[list[int]]:
    """Token ids of every caption: the ids naming its given vector when the set has caption
    vectors (:mod:`mispair.data.text_vectors`), the pre-tokenized ids when it has them, else
    ``tokenizer``'s."""
    if pairs.text_features is not None:
        return vector_tokens(pairs.text_features)
    if pairs.caption_tokens is not None:
        return pairs.caption_tokens
    assert tokenizer is not None, "a tokenizer is needed to tokenize captions"
    encode_many = getattr(tokenizer, "encode_many", None)  # a batch call where the tokenizer has one
    if encode_many is not None:
        return encode_many(pairs.captions)
    return shared_ids([tokenizer.encode(c) for c in pairs.captions])


def pad_tokens(token_lists: Sequence[Sequence[int]]) -> tuple[Tensor, Tensor]:
    """``[B, L]`` 0-padded ids and ``[B]`` lengths (at least 1; an empty list is one padding id),
    filled in one scatter of all the ids (no per-row tensors: it runs on every batch)."""
    counts = np.fromiter((len(t) for t in token_lists), dtype=np.int64, count=len(token_lists))
    lengths = np.maximum(counts, 1)
    tokens = np.zeros((len(token_lists), int(lengths.max()) if len(token_lists) else 1), dtype=np.int64)
    total = int(counts.sum())
    if total:
        ids = np.fromiter(itertools.chain.from_iterable(token_lists), dtype=np.int64, count=total)
        starts = np.repeat(np.cumsum(counts) - counts, counts)
        tokens[np.repeat(np.arange(len(token_lists)), counts), np.arange(total) - starts] = ids
    return torch.from_numpy(tokens), torch.from_numpy(lengths)


def batch_indices(
    order: np.ndarray, batch_size: int, *, seed: int | None = None, drop_last: bool = False
) -> list[np.ndarray]:
    """The indices ``order`` cut into batches of ``batch_size``, shuffled by ``seed`` first (None:
    in order); the last, shorter batch dropped with ``drop_last``."""
    if seed is not None:
        order = order[np.random.default_rng(seed).permutation(len(order))]
    stop = len(order) - (len(order) % batch_size if drop_last else 0)
    return [order[start : start + batch_size] for start in range(0, stop, batch_size)]


class TrainingPairs:
    """The training pairs of a (possibly noisy) split, ready to be cut into batches.

    Args:
        pairs: the split.
        tokens: token ids per caption (see :func:`encode_captions`).
        image_of_caption: ``[n_captions]`` the image each caption is paired with for training
            (a ``NoiseRecord``'s, or the split's own).
        shard: this process's share of every batch in a multi-process run
            (:meth:`~mispair.distributed.Shard.part`); all of it by default.
    """

    def __init__(
        self,
        pairs: PairSet,
        tokens: list[list[int]],
        image_of_caption: np.ndarray | None = None,
        *,
        shard: Shard = SINGLE_PROCESS,
    ) -> None:
        self.pairs = pairs
        self.tokens = tokens
        paired = pairs.image_of_caption if image_of_caption is None else image_of_caption
        self.image_of_caption = np.asarray(paired, dtype=np.int64)
        self.caption_ids = np.arange(len(tokens), dtype=np.int64)  # Batch.index of each pair
        self.shard = shard

    def __len__(self) -> int:
        return len(self.tokens)

    def batch(self, caption_indices: np.ndarray) -> Batch:
        """The pairs of ``caption_indices`` as one batch."""
        caption_indices = np.asarray(caption_indices, dtype=np.int64)
        image_index = self.image_of_caption[caption_indices]
        images = torch.from_numpy(rows(self.pairs.images, image_index, np.float32))
        tokens, lengths = pad_tokens([self.tokens[k] for k in caption_indices])
        return Batch(
            images,
            tokens,
            lengths,
            torch.from_numpy(self.caption_ids[caption_indices]),
            torch.from_numpy(image_index),
        )

    @staticmethod
    def join(parts: Sequence[TrainingPairs]) -> TrainingPairs:
        """The pairs of ``parts`` as one set (images one after another), as each is paired."""
        offsets = np.cumsum([0] + [p.pairs.n_images for p in parts])
        paired = np.concatenate([p.image_of_caption + o for p, o in zip(parts, offsets)])
        tokens = [t for p in parts for t in p.tokens]
        return TrainingPairs(concatenate([p.pairs for p in parts]), tokens, paired)

    def subset(self, caption_indices: np.ndarray) -> TrainingPairs:
        """The pairs ``caption_indices`` as a training set of their own, as paired here; its
        batches keep these pairs' indices in this set as ``Batch.index``."""
        caption_indices = np.asarray(caption_indices, dtype=np.int64)
        part = TrainingPairs(
            self.pairs,
            [self.tokens[k] for k in caption_indices],
            self.image_of_caption[caption_indices],
            shard=self.shard,
        )
        part.caption_ids = self.caption_ids[caption_indices]
        return part

    def sharded(self, shard: Shard) -> TrainingPairs:
        """These pairs, with :meth:`batches` giving ``shard``'s share of every batch."""
        copy = TrainingPairs(self.pairs, self.tokens, self.image_of_caption, shard=shard)
        copy.caption_ids = self.caption_ids
        return copy

    def batch_indices(
        self,
        batch_size: int,
        *,
        seed: int | None = None,
        subset: np.ndarray | None = None,
        drop_last: bool = False,
    ) -> list[np.ndarray]:
        """The pair indices of every (global) batch over ``subset`` (default: all pairs), shuffled
        by ``seed`` (None: in order)."""
        order = np.arange(len(self)) if subset is None else np.asarray(subset, dtype=np.int64)
        return batch_indices(order, batch_size, seed=seed, drop_last=drop_last)

    def batches(
        self,
        batch_size: int,
        *,
        seed: int | None = None,
        subset: np.ndarray | None = None,
        drop_last: bool = False,
    ) -> Iterator[Batch]:
        """This process's share (:attr:`shard`) of every batch of :meth:`batch_indices`: the whole
        batches in a single process."""
        for indices in self.batch_indices(batch_size, seed=seed, subset=subset, drop_last=drop_last):
            yield self.batch(self.shard.part(indices))

    def cycled_batches(self, batch_size: int, *, seed: int, subset: np.ndarray) -> Iterator[Batch | None]:
        """Endless shuffled batches over ``subset``, reshuffled at each pass (pass ``r`` shuffled
        by ``child_seed(seed, "cycle", r)``); None forever when ``subset`` is empty. The co-training and L2RM
        recipes pair each step of one subset with a batch of another this way."""
        rounds = 0
        while True:
            if len(subset) == 0:
                yield None
                continue
            yield from self.batches(batch_size, seed=child_seed(seed, "cycle", rounds), subset=subset)
            rounds += 1

    def n_batches(self, batch_size: int, subset_size: int | None = None, drop_last: bool = False) -> int:
        n = len(self) if subset_size is None else subset_size
        return n // batch_size if drop_last else -(-n // batch_size)

"""The all-pairs similarity engine shared by training, division and evaluation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from mispair.nn.embedding import Fragments
from mispair.progress import progress_bar

SimilarityFn = Callable[[Fragments, Fragments], Tensor]


@runtime_checkable
class PreparedHead(Protocol):
    """A head that encodes each side once and then scores blocks of pairs (SGR, SAF)."""

    def prepare_images(self, images: Fragments) -> Any: ...

    def prepare_texts(self, texts: Fragments) -> Any: ...

    def score(self, images: Any, texts: Any) -> Tensor: ...

    def pair_bytes(self, n_words: int) -> int: ...


def _prepared_head(similarity: SimilarityFn) -> PreparedHead | None:
    """The head behind ``similarity`` if it supports prepared scoring.

    Accepts the head itself or a bound ``similarity`` method of a model holding it in ``.head``
    (as :class:`mispair.nn.model.RetrievalModel`).
    """
    owner = getattr(similarity, "__self__", None)
    for candidate in (similarity, getattr(owner, "head", None)):
        if isinstance(candidate, PreparedHead):
            return candidate
    return None


def _blocks(n: int, size: int) -> list[slice]:
    return [slice(start, start + size) for start in range(0, n, max(size, 1))]


@torch.no_grad()
def all_pair_similarities(
    similarity: SimilarityFn,
    images: Fragments,
    texts: Fragments,
    *,
    image_chunk: int = 256,
    caption_chunk: int = 2048,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    progress: bool = False,
    max_block_bytes: int = 1 << 26,
    add_to: Tensor | None = None,
) -> Tensor:
    """Score every image against every caption, one ``image_chunk × caption_chunk`` block at a time.

    Memory is bounded by one block of the head's work, whatever the number of images and
    captions; each block is one vectorised head call (no loop over captions). For heads with
    ``prepare_images``/``prepare_texts``/``score``/``pair_bytes`` (SGR, SAF) each side is
    encoded once, captions are grouped by length (each block padded only to its longest
    caption), and blocks shrink so that ``pairs × pair_bytes(L) <= max_block_bytes``.

    Args:
        similarity: a head (or any ``(Fragments, Fragments) -> [Bi, Bt]`` function).
        images: ``n_images`` image embeddings; texts: ``n_captions`` caption embeddings.
        image_chunk, caption_chunk: largest block sizes.
        device: where to compute (default: where ``images`` lives).
        dtype: optional compute dtype for the embeddings (the head's parameters must match,
            e.g. ``head.double()`` for ``torch.float64``).
        progress: show a progress bar over blocks.
        max_block_bytes: memory budget of one block, for prepared heads.
        add_to: a ``[n_images, n_captions]`` float32 CPU tensor the blocks are added into (and
            returned), instead of a new one: several models' sum in one matrix.

    Returns:
        ``[n_images, n_captions]`` float32 similarities on the CPU.
    """
    device = torch.device(device) if device is not None else images.local.device
    head = _prepared_head(similarity)
    if head is not None:
        return _prepared_similarities(
            head,
            images,
            texts,
            image_chunk,
            caption_chunk,
            device,
            dtype,
            progress,
            max_block_bytes,
            _output(len(images), len(texts), add_to),
        )
    out = _output(len(images), len(texts), add_to)
    blocks = [(i, j) for i in _blocks(len(images), image_chunk) for j in _blocks(len(texts), caption_chunk)]
    for i, j in progress_bar(blocks, desc="similarities", disable=not progress, leave=False):
        block = similarity(images[i].to(device, dtype), texts[j].to(device, dtype))
        out[i, j] += block.float().cpu()
    return out


def _output(n_images: int, n_captions: int, add_to: Tensor | None) -> Tensor:
    """``add_to`` (checked), or a new zero matrix."""
    if add_to is None:
        return torch.zeros(n_images, n_captions, dtype=torch.float32)
    if add_to.shape != (n_images, n_captions) or add_to.dtype != torch.float32:
        raise ValueError(f"add_to: a float32 [{n_images}, {n_captions}] tensor, got {tuple(add_to.shape)}")
    return add_to


def _prepared_similarities(
    head: PreparedHead,
    images: Fragments,
    texts: Fragments,
    image_chunk: int,
    caption_chunk: int,
    device: torch.device,
    dtype: torch.dtype | None,
    progress: bool,
    budget: int,
    out: Tensor,
) -> Tensor:
    """Blocks of ``rows`` images × one length-sorted caption group, each side prepared once, added
    into ``out``."""
    if out.numel() == 0:
        return out
    lengths = texts.lengths.cpu()
    rows = max(1, min(image_chunk, len(images), budget // head.pair_bytes(int(lengths.max()))))
    groups = _length_groups(lengths, caption_chunk, lambda n: rows * head.pair_bytes(n), budget)
    prepared = [head.prepare_texts(texts[group].to(device, dtype)) for group in groups]
    blocks = [(i, g) for i in _blocks(len(images), rows) for g in range(len(groups))]
    image_side, current = None, None
    for i, g in progress_bar(blocks, desc="similarities", disable=not progress, leave=False):
        if current != i:
            image_side, current = head.prepare_images(images[i].to(device, dtype)), i
        out[i, groups[g]] += head.score(image_side, prepared[g]).float().cpu()
    return out


def _length_groups(
    lengths: Tensor, size: int, block_bytes: Callable[[int], int], budget: int
) -> list[Tensor]:
    """Indices sorted by length, cut into groups of at most ``size`` whose block fits ``budget``.

    ``block_bytes(L)`` is the memory of one caption of length ``L`` against a block of images.
    """
    order = torch.argsort(lengths, stable=True)
    groups, start = [], 0
    while start < len(order):
        stop = min(start + size, len(order))
        longest = int(lengths[order[stop - 1]])
        stop = min(stop, start + max(1, budget // block_bytes(longest)))
        groups.append(order[start:stop])
        start = stop
    return groups

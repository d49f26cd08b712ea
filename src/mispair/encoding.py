"""Encode images and captions in batches, on any device, with the models in eval mode.

Every encode loop of mispair (evaluation, the division's scorers, the audit, search, the recipes'
own predictions) goes through here, and every switch of a model to eval mode: :func:`evaluating`
restores each model's mode when its block ends, also on an exception; :func:`frozen` is for a
model that never trains (a pretrained feature extractor, a loaded checkpoint).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import numpy as np
import torch
from torch import Tensor, nn

from mispair.data.batching import TrainingPairs, pad_tokens
from mispair.data.mapped import rows as read_rows
from mispair.data.pairset import PairSet
from mispair.nn.allpairs import all_pair_similarities
from mispair.nn.embedding import Fragments
from mispair.nn.model import RetrievalModel

Module = TypeVar("Module", bound=nn.Module)


@contextlib.contextmanager
def evaluating(*models: nn.Module) -> Iterator[None]:
    """The ``models`` in eval mode inside the block, each back in its own mode after it (also
    when the block raises)."""
    modes = [m.training for m in models]
    for m in models:
        m.eval()
    try:
        yield
    finally:
        for m, mode in zip(models, modes):
            m.train(mode)


def frozen(model: Module) -> Module:
    """``model`` in eval mode for good, its parameters without gradient (returned)."""
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


@torch.no_grad()
def image_batches(
    model: RetrievalModel,
    pairs: PairSet,
    *,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    rows: range | None = None,
) -> Iterator[Fragments]:
    """The embeddings of ``pairs``' images ``rows`` (default: all), ``batch_size`` images at a
    time (as the model is set: call it inside :func:`evaluating` for evaluation)."""
    rows = range(pairs.n_images) if rows is None else rows
    for start in range(rows.start, rows.stop, batch_size):
        stop = min(start + batch_size, rows.stop)
        feats = torch.from_numpy(read_rows(pairs.images, slice(start, stop), np.float32))
        yield model.encode_images(feats.to(device))


@torch.no_grad()
def text_batches(
    model: RetrievalModel,
    tokens: list[list[int]],
    *,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
) -> Iterator[Fragments]:
    """The embeddings of the captions of ``tokens`` (token ids per caption), ``batch_size`` at a
    time."""
    for start in range(0, len(tokens), batch_size):
        ids, lengths = pad_tokens(tokens[start : start + batch_size])
        yield model.encode_texts(ids.to(device), lengths.to(device))


@torch.no_grad()
def encode_split(
    model: RetrievalModel,
    pairs: PairSet,
    tokens: list[list[int]],
    *,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    images: slice = slice(None),
) -> tuple[Fragments, Fragments]:
    """Embeddings of the images ``images`` (default: all) and of every caption of ``pairs``, in
    eval mode."""
    with evaluating(model):
        rows = range(pairs.n_images)[images]
        encoded = Fragments.cat(
            list(image_batches(model, pairs, batch_size=batch_size, device=device, rows=rows))
        )
        texts = Fragments.cat(list(text_batches(model, tokens, batch_size=batch_size, device=device)))
    return encoded, texts


@torch.no_grad()
def similarity_matrix(
    models: Sequence[RetrievalModel],
    pairs: PairSet,
    tokens: list[list[int]],
    *,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    progress: bool = False,
    images: slice = slice(None),
) -> Tensor:
    """``[n_images, n_captions]`` similarities (of the images ``images`` only, when given),
    averaged over ``models`` (co-training, SGRAF), in eval mode."""
    total = None  # every model's similarities added into one matrix
    for model in models:
        image_side, texts = encode_split(
            model, pairs, tokens, batch_size=batch_size, device=device, images=images
        )
        with evaluating(model):
            total = all_pair_similarities(
                model.similarity, image_side, texts, device=device, progress=progress, add_to=total
            )
    return total.div_(len(models))


def similarity_blocks(
    models: Sequence[RetrievalModel],
    pairs: PairSet,
    tokens: list[list[int]],
    *,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
) -> Callable[[slice, slice], np.ndarray]:
    """``block(images, captions) -> [len(images), len(captions)]`` float32: the similarities of
    :func:`similarity_matrix` a block at a time, each model's images and captions encoded once
    (here) and only the block scored per call."""
    encoded = [encode_split(m, pairs, tokens, batch_size=batch_size, device=device) for m in models]

    @torch.no_grad()
    def block(images: slice, captions: slice) -> np.ndarray:
        total = None
        for model, (image_side, texts) in zip(models, encoded):
            with evaluating(model):
                total = all_pair_similarities(
                    model.similarity, image_side[images], texts[captions], device=device, add_to=total
                )
        return total.div_(len(models)).numpy()

    return block


@torch.no_grad()
def pair_similarities(
    models: Sequence[RetrievalModel], train: TrainingPairs, batch_size: int, device: torch.device
) -> np.ndarray:
    """``[len(train)]`` similarity of every pair of ``train`` as paired, in its order (averaged
    over ``models``)."""
    scores = []
    for batch in train.batches(batch_size):
        batch = batch.to(device)
        sims = sum(m(batch.images, batch.tokens, batch.lengths).diagonal() for m in models)
        scores.append((sims / len(models)).float().cpu().numpy())
    return np.concatenate(scores) if scores else np.zeros(0, dtype=np.float32)


def cross_similarities(
    models: Sequence[RetrievalModel],
    train: TrainingPairs,
    images: np.ndarray,
    captions: np.ndarray,
    *,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
) -> Tensor:
    """``[len(images), len(captions)]`` similarities of the training images ``images`` with the
    training captions ``captions`` (indices into ``train``'s images and captions), averaged over
    ``models`` in eval mode (the evaluation's all-pairs engine), on the CPU."""
    features = read_rows(train.pairs.images, images)
    part = PairSet(features, [""] * len(captions), np.zeros(len(captions), dtype=np.int64))
    tokens = [train.tokens[k] for k in captions]
    return similarity_matrix(models, part, tokens, batch_size=batch_size, device=device).float().cpu()

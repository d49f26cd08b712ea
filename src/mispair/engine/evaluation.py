"""Encode a split once, score all pairs in chunks, and compute the retrieval protocol (in a
multi-process run, each rank scores a block of the images and rank 0 computes the metrics)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from mispair.data.batching import pad_tokens
from mispair.data.pairset import PairSet, caption_groups
from mispair.distributed import SINGLE_PROCESS, Shard, from_main, gather_rows
from mispair.engine.metrics import retrieval_metrics
from mispair.errors import DataError
from mispair.nn.allpairs import all_pair_similarities
from mispair.nn.embedding import Fragments
from mispair.nn.model import RetrievalModel


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
    """Embeddings of the images ``images`` (default: all) and of every caption of ``pairs``
    (model in eval mode)."""
    was_training = model.training
    model.eval()
    rows = range(pairs.n_images)[images]
    encoded = Fragments.cat(list(image_batches(model, pairs, batch_size=batch_size, device=device,
                                               rows=rows)))  # fmt: skip
    texts = Fragments.cat(list(text_batches(model, tokens, batch_size=batch_size, device=device)))
    model.train(was_training)
    return encoded, texts


@torch.no_grad()
def image_batches(model: RetrievalModel, pairs: PairSet, *, batch_size: int = 256,
                  device: torch.device | str = "cpu",
                  rows: range | None = None) -> Iterator[Fragments]:  # fmt: skip
    """The embeddings of ``pairs``' images ``rows`` (default: all), ``batch_size`` images at a
    time (as the model is set: call it in eval mode for evaluation)."""
    rows = range(pairs.n_images) if rows is None else rows
    for start in range(rows.start, rows.stop, batch_size):
        stop = min(start + batch_size, rows.stop)
        feats = torch.from_numpy(np.array(pairs.images[start:stop], np.float32))
        yield model.encode_images(feats.to(device))


@torch.no_grad()
def text_batches(model: RetrievalModel, tokens: list[list[int]], *, batch_size: int = 256,
                 device: torch.device | str = "cpu") -> Iterator[Fragments]:  # fmt: skip
    """The embeddings of the captions of ``tokens`` (token ids per caption), ``batch_size`` at a
    time."""
    for start in range(0, len(tokens), batch_size):
        ids, lengths = pad_tokens(tokens[start : start + batch_size])
        yield model.encode_texts(ids.to(device), lengths.to(device))


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
    averaged over ``models`` (co-training, SGRAF)."""
    total = None
    for model in models:
        image_side, texts = encode_split(model, pairs, tokens, batch_size=batch_size, device=device,
                                         images=images)  # fmt: skip
        was_training = model.training
        model.eval()
        sims = all_pair_similarities(model.similarity, image_side, texts, device=device, progress=progress)
        model.train(was_training)
        total = sims if total is None else total + sims
    return total / len(models)


def evaluate_split(
    models: Sequence[RetrievalModel],
    pairs: PairSet,
    tokens: list[list[int]],
    *,
    folds: int = 1,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    progress: bool = False,
    shard: Shard = SINGLE_PROCESS,
) -> dict[str, float]:
    """The retrieval metrics of ``models`` on ``pairs`` (see :func:`retrieval_metrics`). In a
    multi-process run (``shard``) every rank calls it: each scores its block of the images, rank 0
    gathers the rows and computes the metrics, and every rank returns them."""
    per_image = pairs.captions_per_image
    if per_image is None and folds != 1:
        raise DataError(f"{pairs.name}: {folds}-fold evaluation needs the same number of captions per image")
    block = similarity_matrix(models, pairs, tokens, batch_size=batch_size, device=device, progress=progress,
                              images=shard.block(pairs.n_images))  # fmt: skip
    sims = gather_rows(shard, block, pairs.n_images)
    return from_main(shard, lambda: _metrics(sims, pairs, per_image, folds))


def _metrics(sims: Tensor, pairs: PairSet, per_image: int | None, folds: int) -> dict[str, float]:
    """The metrics of ``sims``; captions of any number per image when ``per_image`` is None."""
    groups = caption_groups(pairs.captions) if per_image in (1, None) else None
    layout = {"image_of_caption": pairs.image_of_caption} if per_image is None else {}
    metrics = retrieval_metrics(sims, per_image or 1, folds, **layout)
    if groups is not None and len(set(groups.tolist())) < len(groups):
        equivalent = retrieval_metrics(sims, per_image or 1, folds, caption_groups=groups, **layout)
        metrics.update({f"eq_{k}": v for k, v in equivalent.items()})
    return metrics

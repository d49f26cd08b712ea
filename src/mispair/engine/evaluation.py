"""Encode a split once, score all pairs in chunks, and compute the retrieval protocol."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from mispair.data.batching import pad_tokens
from mispair.data.pairset import PairSet, caption_groups
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
) -> tuple[Fragments, Fragments]:
    """Embeddings of every image and every caption of ``pairs`` (model in eval mode)."""
    was_training = model.training
    model.eval()
    images = Fragments.cat(list(image_batches(model, pairs, batch_size=batch_size, device=device)))
    texts = Fragments.cat(list(text_batches(model, tokens, batch_size=batch_size, device=device)))
    model.train(was_training)
    return images, texts


@torch.no_grad()
def image_batches(model: RetrievalModel, pairs: PairSet, *, batch_size: int = 256,
                  device: torch.device | str = "cpu") -> Iterator[Fragments]:  # fmt: skip
    """The embeddings of ``pairs``' images, ``batch_size`` images at a time (as the model is set:
    call it in eval mode for evaluation)."""
    for start in range(0, pairs.n_images, batch_size):
        feats = torch.from_numpy(np.array(pairs.images[start : start + batch_size], np.float32))
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
) -> Tensor:
    """``[n_images, n_captions]`` similarities, averaged over ``models`` (co-training, SGRAF)."""
    total = None
    for model in models:
        images, texts = encode_split(model, pairs, tokens, batch_size=batch_size, device=device)
        was_training = model.training
        model.eval()
        sims = all_pair_similarities(model.similarity, images, texts, device=device, progress=progress)
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
) -> dict[str, float]:
    """The retrieval metrics of ``models`` on ``pairs`` (see :func:`retrieval_metrics`)."""
    per_image = pairs.captions_per_image
    if per_image is None:
        raise DataError(f"{pairs.name}: evaluation needs caption k of image k // c for every caption")
    sims = similarity_matrix(
        models, pairs, tokens, batch_size=batch_size, device=device, progress=progress
    )
    groups = caption_groups(pairs.captions) if per_image == 1 else None
    metrics = retrieval_metrics(sims, per_image, folds)
    if groups is not None and len(set(groups.tolist())) < len(groups):
        equivalent = retrieval_metrics(sims, per_image, folds, caption_groups=groups)
        metrics.update({f"eq_{k}": v for k, v in equivalent.items()})
    return metrics

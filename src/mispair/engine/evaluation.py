"""Encode a split once, score all pairs in chunks, and compute the retrieval protocol (in a
multi-process run, each rank scores a block of the images and rank 0 computes the metrics)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from mispair.data.pairset import PairSet, caption_groups
from mispair.distributed import SINGLE_PROCESS, Shard, from_main, gather_rows
from mispair.encoding import similarity_matrix
from mispair.engine.metrics import retrieval_metrics
from mispair.errors import DataError
from mispair.nn.model import RetrievalModel


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

"""Encode a split once, score all pairs in chunks, and compute the retrieval protocol (in a
multi-process run, each rank scores a block of the images and rank 0 computes the metrics)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import torch

from mispair.data.pairset import PairSet, caption_groups
from mispair.distributed import SINGLE_PROCESS, Shard, from_main, gather_rows
from mispair.encoding import similarity_blocks, similarity_matrix
from mispair.engine.assembly import pick_device, run_split
from mispair.engine.metrics import retrieval_metrics, streamed_retrieval_metrics
from mispair.engine.trained import TrainedRun
from mispair.errors import ConfigError, DataError
from mispair.nn.model import RetrievalModel

STREAMED_ABOVE = 1 << 30
"""Above this many bytes of similarity matrix (float32), a single process's evaluation never holds
it: :func:`~mispair.engine.metrics.streamed_retrieval_metrics` reads it a block of images at a time,
scored twice (a 10,000-image split with 50,000 captions: 2 GB)."""


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
    if shard.world == 1 and 4 * pairs.n_images * pairs.n_captions > STREAMED_ABOVE:
        block = similarity_blocks(models, pairs, tokens, batch_size=batch_size, device=device)
        streamed = partial(streamed_retrieval_metrics, block, pairs.n_images, pairs.n_captions)
        return _metrics(streamed, pairs, per_image, folds)
    images = shard.block(pairs.n_images)
    if images.start == images.stop:  # fewer images than processes: this rank scores none
        block = torch.zeros((0, pairs.n_captions), device=device)
    else:
        block = similarity_matrix(
            models, pairs, tokens, batch_size=batch_size, device=device, progress=progress, images=images
        )
    sims = gather_rows(shard, block, pairs.n_images)
    return from_main(shard, lambda: _metrics(partial(retrieval_metrics, sims), pairs, per_image, folds))


def _metrics(
    score: Callable[..., dict[str, float]], pairs: PairSet, per_image: int | None, folds: int
) -> dict[str, float]:
    """The metrics by ``score(captions_per_image, folds, **layout)`` (:func:`retrieval_metrics` of
    the matrix, or :func:`streamed_retrieval_metrics`); captions of any number per image when
    ``per_image`` is None."""
    groups = caption_groups(pairs.captions) if per_image in (1, None) else None
    layout = {"image_of_caption": pairs.image_of_caption} if per_image is None else {}
    metrics = score(per_image or 1, folds, **layout)
    if groups is not None and len(set(groups.tolist())) < len(groups):
        equivalent = score(per_image or 1, folds, caption_groups=groups, **layout)
        metrics.update({f"eq_{k}": v for k, v in equivalent.items()})
    return metrics


def evaluate_checkpoint(
    path: str | Path | Sequence[str | Path],
    *,
    split: str | None = None,
    data_root: str | None = None,
    folds: int | None = None,
    device: str = "auto",
    progress: bool = False,
    shard: Shard = SINGLE_PROCESS,
) -> dict[str, float]:
    """Retrieval metrics of a checkpoint's models on a split (default: the config's test split).

    Several checkpoints (e.g. an SGR and a SAF run, for SGRAF) are evaluated on their averaged
    similarities; the data and tokenizer come from the first one's config. Every rank of a
    multi-process run (``shard``) calls it and scores its block of the images.
    """
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    dev = pick_device(device, "--device")
    runs = [TrainedRun.open(p, dev) for p in paths]
    config = runs[0].config
    if data_root:
        config.data.root, config.data.source = data_root, "auto"
    pairs = run_split(config, split or config.data.test_split)
    return evaluate_runs(runs, pairs, folds=folds, device=dev, progress=progress, shard=shard)


def evaluate_runs(
    runs: Sequence[TrainedRun],
    pairs: PairSet,
    *,
    folds: int | None = None,
    device: torch.device,
    progress: bool = False,
    shard: Shard = SINGLE_PROCESS,
) -> dict[str, float]:
    """Retrieval metrics of trained runs already open (their similarities averaged) on ``pairs``
    (as the model reads them), on ``device``; ``folds``: default the config's ``test_folds``."""
    config = runs[0].config
    for run in runs:
        run.check_inputs(pairs)
    tokens = runs[0].tokens(pairs)
    runs[0].prepare_texts(tokens, data=config.data, progress=progress)
    for other in runs[1:]:
        if other.tokens(pairs) != tokens:
            raise ConfigError(f"{other.path}: tokenizes captions differently from {runs[0].path}")
    models = [m for run in runs for m in run.models]
    return evaluate_split(
        models,
        pairs,
        tokens,
        folds=folds or config.data.test_folds,
        batch_size=config.train.eval_batch_size,
        device=device,
        progress=progress,
        shard=shard,
    )

"""The raw-score baseline: the plain cosine of a pair's image and caption vectors.

When the image and caption vectors come from one matched pair of towers (a CLIP model's, given as
embedding columns with ``data.embeddings_aligned``, or the ``open_clip`` encoders), their cosine
is the score the usual filters threshold (LAION, DataComp). The audit reports it beside its own
held-out score, and on known mismatches (planted swaps) both detections side by side: what the
robust model adds over the raw score.
"""

from __future__ import annotations

import numpy as np

from mispair.config import DataConfig
from mispair.data.batching import TrainingPairs
from mispair.data.pairset import PairSet
from mispair.errors import ConfigError


def aligned(data: DataConfig) -> bool:
    """Whether the run's image and caption vectors share one space (their cosine means something):
    declared (``data.embeddings_aligned``), or from a caption encoder that ``shares_space_with``
    the run's image encoder (an open_clip model's two towers), with the same options."""
    if data.embeddings_aligned:
        return True
    if not data.caption_encoder or data.image_encoder_options != data.caption_encoder_options:
        return False
    from mispair.data.caption_encoders import CAPTION_ENCODERS

    try:
        encoder = CAPTION_ENCODERS.get(data.caption_encoder)
    except ConfigError:  # an unknown name is refused where the vectors are read
        return False
    return getattr(encoder, "shares_space_with", None) == data.image_encoder


def check_aligned(data: DataConfig, pairs: PairSet) -> None:
    """A one-line error when ``data`` declares aligned vectors that ``pairs`` cannot compare:
    no caption vectors, or another dimension than the images'."""
    if not aligned(data):
        return
    if pairs.text_features is None:  # declared aligned: the open_clip towers always give both
        raise ConfigError(
            "--embeddings-aligned: the captions have no vectors to compare with the images' (name "
            "the text-embedding column with --text-embedding-column)"
        )
    if pairs.text_features.shape[1] != pairs.feature_dim:
        raise ConfigError(
            f"--embeddings-aligned: image vectors of dimension {pairs.feature_dim} and caption "
            f"vectors of dimension {pairs.text_features.shape[1]} cannot be compared (one space "
            "has one dimension); drop --embeddings-aligned"
        )


def raw_similarity(pairs: TrainingPairs) -> np.ndarray:
    """``[n_pairs]`` cosine of each caption's vector and the mean feature of the image it is
    paired with (as paired: planted swaps included). The mean features are computed a block of
    images at a time (:meth:`~mispair.data.pairset.PairSet.with_mean_fragment`)."""
    images = pairs.pairs.with_mean_fragment().images[pairs.image_of_caption, 0]
    texts = np.asarray(pairs.pairs.text_features, dtype=np.float32)
    dot = (images * texts).sum(axis=1)
    norms = np.linalg.norm(images, axis=1) * np.linalg.norm(texts, axis=1)
    return dot / np.maximum(norms, 1e-12)

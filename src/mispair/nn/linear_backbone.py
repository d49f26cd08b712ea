"""Models whose only trained part is two linear maps on frozen inputs, run over a batch together.

The pretrained backbone with the ``cosine`` head (the audit's models, and ``configs/holdout/``'s)
trains ``Linear(image feature → E)`` of the mean image feature and ``Linear(caption vector → E)``
of one frozen vector per caption (MiniLM's mean state, or a vector given with the collection),
and scores a pair by the cosine of the two. A step of such a model is a few small products; run
through each model's modules apart, most of its time goes to what the cosine never reads (the
fragments' norms and masks, the caption's projection made twice, each caption's cached vector
looked up once per model).

:func:`stacked_similarities` gives every model's similarities of a batch, ``[S, B, B]``, from the
mean features and the caption vectors read once, each model's two maps applied to them: what
``model(features, tokens, lengths)`` gives model by model, to float rounding
(``tests/nn/test_linear_backbone.py``). The losses of :mod:`mispair.losses` read the stack as
they read one matrix.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from mispair.nn.embedding import l2_normalize
from mispair.nn.encoders import FragmentImageEncoder
from mispair.nn.heads.cosine import CosineHead
from mispair.nn.model import RetrievalModel

LINEAR_WEIGHTS = (
    "image_encoder.fc.weight",
    "image_encoder.fc.bias",
    "text_encoder.fc.weight",
    "text_encoder.fc.bias",
)
"""The trained tensors of a linear backbone (in this order)."""


def is_linear_backbone(model: RetrievalModel) -> bool:
    """Whether ``model`` is the ``cosine`` head on the projected mean image feature (no MLP, no
    fragments) and on a frozen vector per caption (a text encoder that ``reads_caption_vectors``),
    with :data:`LINEAR_WEIGHTS` its only trained tensors."""
    image = model.image_encoder
    linear_image = (
        isinstance(image, FragmentImageEncoder)
        and image.pooling == "features"
        and not image.fragments
        and image.mlp is None
    )
    if not linear_image or not isinstance(model.head, CosineHead):
        return False
    if not getattr(model.text_encoder, "reads_caption_vectors", False):
        return False
    trained = sorted(name for name, p in model.named_parameters() if p.requires_grad)
    return trained == sorted(LINEAR_WEIGHTS)


def run_together(models: Sequence[RetrievalModel]) -> bool:
    """Whether :func:`stacked_similarities` computes ``models``: each a linear backbone, all
    reading the same caption vectors (one text encoder class, one cache of frozen states)."""
    first = models[0].text_encoder
    return all(
        is_linear_backbone(m)
        and type(m.text_encoder) is type(first)
        and getattr(m.text_encoder, "cache", None) is getattr(first, "cache", None)
        for m in models
    )


def stacked_similarities(
    models: Sequence[RetrievalModel], features: Tensor, tokens: Tensor, lengths: Tensor
) -> Tensor:
    """``[S, B, B]``: model ``s``'s cosine similarities of the batch's images (``features
    [B, K, D]``) and captions (ids ``[B, L]``, ``lengths [B]``), for models that
    :func:`run_together`: ``S_sij = cos(W_s^v f̄_i + b_s^v, W_s^t c_j + b_s^t)`` with ``f̄_i`` the
    mean feature of image ``i`` and ``c_j`` the frozen vector of caption ``j`` (read once)."""
    image_fc = models[0].image_encoder.fc
    means = features.to(image_fc.weight.dtype).mean(dim=1)  # [B, D]
    captions = models[0].text_encoder.batch_vectors(tokens, lengths)  # [B, H]
    images = torch.stack([_project(means, m.image_encoder.fc) for m in models])  # [S, B, E]
    texts = torch.stack([_project(captions, m.text_encoder.fc) for m in models])
    return images @ texts.transpose(1, 2)


def _project(inputs: Tensor, fc: torch.nn.Linear) -> Tensor:
    """``[B, E]``: the L2-normalised ``fc(inputs)``."""
    return l2_normalize(F.linear(inputs.to(fc.weight.dtype), fc.weight, fc.bias))

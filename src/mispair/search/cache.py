"""Encoded collection images kept between reranks, within a memory budget.

Reranking a text query scores its candidate images with the head, which reads their fragment
embeddings; encoding a candidate (its ``n_fragments × feature_dim`` features through the image
encoder) can cost more than scoring it. A search session or an evaluation that reranks many
queries meets the same images again, so their embeddings are kept, the least recently used
dropped first once they exceed the budget.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import torch

from mispair.data.pairset import PairSet
from mispair.nn.embedding import Fragments
from mispair.search.model import SearchModel

DEFAULT_BUDGET = 512 << 20


class EncodedImages:
    """Each model's embeddings of collection images by image number.

    Args:
        model: the checkpoint's models.
        features: ``features(images [n]) -> [n, n_fragments, dim]`` the images' features.
        budget: bytes of embeddings to keep (at least the images of one call are kept).
    """

    def __init__(self, model: SearchModel, features: Callable[[np.ndarray], np.ndarray],
                 budget: int = DEFAULT_BUDGET) -> None:  # fmt: skip
        self.model, self.features, self.budget = model, features, budget
        self.rows: OrderedDict[int, list[Fragments]] = OrderedDict()
        self.size = 0

    def __call__(self, images: np.ndarray) -> list[Fragments]:
        """Each model's embeddings of ``images`` (in that order), encoding those not kept."""
        images = [int(i) for i in images]
        missing = [i for i in dict.fromkeys(images) if i not in self.rows]
        if missing:
            features = self.features(np.array(missing))
            encoded = self.model.encode_images(PairSet(features, [], np.zeros(0)))
            for row, image in enumerate(missing):
                self.rows[image] = [_copy(part[row : row + 1]) for part in encoded]
                self.size += sum(_bytes(part) for part in self.rows[image])
        for image in images:
            self.rows.move_to_end(image)
        keep = set(images)
        while self.size > self.budget and next(iter(self.rows)) not in keep:
            _, dropped = self.rows.popitem(last=False)
            self.size -= sum(_bytes(part) for part in dropped)
        return [Fragments.cat([self.rows[i][k] for i in images]) for k in range(len(self.model.models))]


def _copy(part: Fragments) -> Fragments:
    """A row that owns its memory (not a view keeping its whole batch alive)."""
    norms = None if part.norms is None else part.norms.clone()
    return Fragments(part.local.clone(), part.mask.clone(), part.pooled.clone(), norms)


def _bytes(part: Fragments) -> int:
    tensors = [part.local, part.mask, part.pooled] + ([] if part.norms is None else [part.norms])
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))

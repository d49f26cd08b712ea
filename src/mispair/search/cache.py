"""Encoded collection items kept between reranks, within a memory budget.

Reranking scores a query's candidates with the head, which reads their fragment embeddings;
encoding a candidate (an image's ``n_fragments × feature_dim`` features through the image encoder,
a caption through the text encoder) can cost more than scoring it. A search session or an
evaluation that reranks many queries meets the same items again, so their embeddings are kept,
the least recently used dropped first once they exceed the budget.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import torch

from mispair.nn.embedding import Fragments

DEFAULT_BUDGET = 512 << 20
Encoder = Callable[[np.ndarray], list[Fragments]]
"""``encode(items [n]) -> [Fragments of the n items]``, one per model."""


class EncodedItems:
    """Each model's embeddings of collection items (images or captions) by number.

    Args:
        encode: encodes items (see :data:`Encoder`).
        budget: bytes of embeddings to keep (the items of the current call are always kept).
    """

    def __init__(self, encode: Encoder, budget: int = DEFAULT_BUDGET) -> None:
        self.encode, self.budget = encode, budget
        self.rows: OrderedDict[int, list[Fragments]] = OrderedDict()
        self.size = 0

    def __call__(self, items: np.ndarray) -> list[Fragments]:
        """Each model's embeddings of ``items`` (in that order), encoding those not kept."""
        items = [int(i) for i in items]
        missing = [i for i in dict.fromkeys(items) if i not in self.rows]
        if missing:
            encoded = self.encode(np.array(missing))
            for row, item in enumerate(missing):
                self.rows[item] = [_own(part[row : row + 1].trimmed()) for part in encoded]
                self.size += sum(_bytes(part) for part in self.rows[item])
        for item in items:
            self.rows.move_to_end(item)
        keep = set(items)
        while self.size > self.budget and next(iter(self.rows)) not in keep:
            _, dropped = self.rows.popitem(last=False)
            self.size -= sum(_bytes(part) for part in dropped)
        return [Fragments.cat([self.rows[i][k] for i in items]) for k in range(len(self.rows[items[0]]))]


def _own(part: Fragments) -> Fragments:
    """A row that owns its memory (not a view keeping its whole batch alive)."""
    norms = None if part.norms is None else part.norms.clone()
    return Fragments(part.local.clone(), part.mask.clone(), part.pooled.clone(), norms)


def _bytes(part: Fragments) -> int:
    tensors = [part.local, part.mask, part.pooled] + ([] if part.norms is None else [part.norms])
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))

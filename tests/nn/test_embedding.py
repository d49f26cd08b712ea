"""Fragments: trimming the padded fragment axis."""

from __future__ import annotations

import torch

from mispair.nn.embedding import Fragments


def padded_captions(lengths: list[int], width: int, dim: int = 4) -> Fragments:
    gen = torch.Generator().manual_seed(0)
    mask = torch.arange(width) < torch.tensor(lengths).unsqueeze(1)
    local = torch.randn(len(lengths), width, dim, generator=gen)
    norms = torch.rand(len(lengths), width, generator=gen)
    return Fragments(local, mask, torch.randn(len(lengths), dim, generator=gen), norms)


def test_trimmed_cuts_to_the_longest_and_keeps_every_real_fragment():
    texts = padded_captions([3, 5, 2], width=9)
    cut = texts.trimmed()
    assert cut.local.shape == (3, 5, 4) and cut.mask.shape == (3, 5) and cut.norms.shape == (3, 5)
    assert torch.equal(cut.lengths, texts.lengths)
    for row, length in enumerate([3, 5, 2]):
        assert torch.equal(cut.local[row, :length], texts.local[row, :length])
        assert torch.equal(cut.norms[row, :length], texts.norms[row, :length])
    assert torch.equal(cut.pooled, texts.pooled)


def test_trimmed_keeps_one_column_when_nothing_is_real():
    empty = padded_captions([0, 0], width=4)
    assert empty.trimmed().local.shape == (2, 1, 4)
    none = padded_captions([], width=4)
    assert none.trimmed().local.shape == (0, 1, 4)

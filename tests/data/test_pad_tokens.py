"""Padding token lists into a batch: the scatter against a per-row loop."""

import torch
from hypothesis import given
from hypothesis import strategies as st

from mispair.data.batching import pad_tokens


def _padded_by_rows(token_lists):
    """The reference: one row at a time, 0 after each caption's ids, lengths at least 1."""
    width = max([1, *(len(ids) for ids in token_lists)])
    tokens = torch.zeros(len(token_lists), width, dtype=torch.long)
    for row, ids in enumerate(token_lists):
        for col, token in enumerate(ids):
            tokens[row, col] = token
    return tokens, torch.tensor([max(1, len(ids)) for ids in token_lists], dtype=torch.long)


@given(st.lists(st.lists(st.integers(1, 2**40), max_size=12), max_size=9))
def test_pad_tokens_equals_padding_row_by_row(token_lists):
    tokens, lengths = pad_tokens(token_lists)
    expected_tokens, expected_lengths = _padded_by_rows(token_lists)
    assert tokens.dtype == torch.long and lengths.dtype == torch.long
    assert torch.equal(tokens, expected_tokens) and torch.equal(lengths, expected_lengths)


def test_tuples_and_empty_captions_pad_like_lists():
    tokens, lengths = pad_tokens([(5, 6), (), [7]])
    assert tokens.tolist() == [[5, 6], [0, 0], [7, 0]] and lengths.tolist() == [2, 1, 1]

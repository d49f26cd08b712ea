"""Image features under several processes (``torchrun``, one machine or several sharing the cache
folder): each process computes its own block of the missing chunks first, then helps with the
others' from their ends, and every process reads the same features one process computes."""

from __future__ import annotations

import numpy as np
import pytest

from mispair.data.features import claim_order, extract_grid_features, process_rank

from .test_sources_prepare import TinyGrid, pictures

pytest.importorskip("PIL.Image")


def test_each_process_claims_its_block_then_the_others_from_their_ends():
    assert claim_order(10, 0, 2) == [0, 1, 2, 3, 4, 9, 8, 7, 6, 5]
    assert claim_order(10, 1, 2) == [5, 6, 7, 8, 9, 4, 3, 2, 1, 0]
    assert claim_order(7, 2, 3) == [4, 5, 6, 1, 0, 3, 2]
    assert claim_order(10, 0, 1) == []  # one process: each chunk as it is read, as before
    for rank in range(3):
        assert sorted(claim_order(7, rank, 3)) == list(range(7))


def test_the_rank_comes_from_torchrun_s_environment(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert process_rank() == (0, 1)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert process_rank() == (1, 2)
    monkeypatch.setenv("RANK", "5")
    assert process_rank() == (0, 1)


def test_a_second_node_computes_its_block_first_and_the_first_reads_what_it_left(tmp_path, monkeypatch):
    images, keys = pictures(12), [f"k{i}" for i in range(12)]
    order: list[int] = []

    def load(i):
        order.append(i)
        return images[i]

    reference, valid = extract_grid_features(
        keys, lambda i: images[i], tmp_path / "one", TinyGrid(), chunk_size=3, progress=False
    )
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")  # node 1 starts first, alone: its block, then node 0's from the end
    features, _ = extract_grid_features(
        keys, load, tmp_path / "two", TinyGrid(), chunk_size=3, progress=False
    )
    assert order == [6, 7, 8, 9, 10, 11, 3, 4, 5, 0, 1, 2]
    np.testing.assert_array_equal(features, reference)
    order.clear()
    monkeypatch.setenv("RANK", "0")  # node 0 then finds every chunk in the shared cache
    features, again = extract_grid_features(
        keys, load, tmp_path / "two", TinyGrid(), chunk_size=3, progress=False
    )
    assert order == []
    np.testing.assert_array_equal(features, reference)
    assert (again == valid).all()

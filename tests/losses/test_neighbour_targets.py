"""IN2R's target builder (mispair.losses.neighbour_targets) against brute-force references: a
list-based FIFO for the memory, a loop over the memory for the neighbours, the attention block
written out by hand, and the loss's cross-entropies summed term by term."""

import math
from collections import deque

import numpy as np
import pytest
import torch

from mispair.losses.neighbour_targets import (
    GraphRefiner,
    PairMemory,
    nearest_partners,
    neighbour_target_loss,
)


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


@pytest.mark.parametrize("size", [1, 4, 7])
def test_the_memory_is_a_fifo_of_the_last_rows(size):
    memory = PairMemory(size, 3)
    reference: deque = deque(maxlen=size)
    for n in [2, 0, 5, 1, 9, 3]:
        images, texts = torch.randn(n, 3, dtype=torch.float64), torch.randn(n, 3, dtype=torch.float64)
        memory.add(images, texts)
        reference.extend(zip(_unit(images).float(), _unit(texts).float()))
        held_images, held_texts = memory.rows()
        assert len(memory) == len(reference)
        # as a set of rows (the ring's order is its own): each held pair is one of the last ones
        got = sorted(zip(held_images.tolist(), held_texts.tolist()))
        want = sorted(zip([i.tolist() for i, _ in reference], [t.tolist() for _, t in reference]))
        np.testing.assert_allclose(np.array([g[0] for g in got]), np.array([w[0] for w in want]), atol=1e-6)
        np.testing.assert_allclose(np.array([g[1] for g in got]), np.array([w[1] for w in want]), atol=1e-6)


def test_the_memory_detaches_and_round_trips_its_state():
    memory = PairMemory(5, 2)
    images = torch.randn(3, 2, requires_grad=True)
    memory.add(images, torch.randn(3, 2))
    assert not memory.rows()[0].requires_grad
    copy = PairMemory(5, 2)
    copy.load_state_dict(memory.state_dict())
    assert len(copy) == 3 and copy.next_row == 3
    assert torch.equal(copy.rows()[0], memory.rows()[0]) and torch.equal(copy.rows()[1], memory.rows()[1])


def test_nearest_partners_are_the_partners_of_the_most_similar_keys():
    torch.manual_seed(0)
    queries, keys, partners = torch.randn(6, 4), _unit(torch.randn(10, 4)), torch.randn(10, 4)
    got = nearest_partners(queries, keys, partners, k=3)
    for b in range(6):
        sims = [float(_unit(queries[b]) @ keys[m]) for m in range(10)]
        best = sorted(range(10), key=lambda m: -sims[m])[:3]
        assert torch.equal(got[b], partners[best])
    assert nearest_partners(queries, keys[:2], partners[:2], k=5).shape == (6, 2, 4)


def test_the_mean_refiner_is_the_normalised_mean():
    nodes = torch.randn(3, 5, 4)
    assert torch.allclose(GraphRefiner(4, mean=True)(nodes), _unit(nodes.mean(dim=1)), atol=1e-6)


def test_the_graph_refiner_is_attention_residual_layer_norm_then_mean():
    torch.manual_seed(0)
    dim, heads = 8, 2
    refiner = GraphRefiner(dim, heads=heads).eval()  # eval: no dropout
    nodes = torch.randn(2, 3, dim)
    attention = refiner.attention
    wq, wk, wv = attention.in_proj_weight.chunk(3)
    bq, bk, bv = attention.in_proj_bias.chunk(3)
    head = dim // heads
    expected = torch.zeros(2, dim)
    for b in range(2):
        x = nodes[b]
        q, k, v = x @ wq.t() + bq, x @ wk.t() + bk, x @ wv.t() + bv
        outs = []
        for h in range(heads):
            part = slice(h * head, (h + 1) * head)
            weights = torch.softmax(q[:, part] @ k[:, part].t() / math.sqrt(head), dim=1)
            outs.append(weights @ v[:, part])
        attended = torch.cat(outs, dim=1) @ attention.out_proj.weight.t() + attention.out_proj.bias
        y = torch.nn.functional.layer_norm(x + attended, (dim,), refiner.norm.weight, refiner.norm.bias)
        expected[b] = _unit(y.mean(dim=0))
    assert torch.allclose(refiner(nodes), expected, atol=1e-5)


def test_the_loss_is_half_symmetric_infonce_plus_reverse_cross_entropy():
    torch.manual_seed(0)
    queries, targets, tau, eps = (
        torch.randn(5, 4, dtype=torch.float64),
        _unit(torch.randn(5, 4)).double(),
        0.1,
        1e-7,
    )
    got = neighbour_target_loss(queries, targets, tau)
    sims = _unit(queries) @ targets.t() / tau
    for i in range(5):
        row = torch.softmax(sims[i], dim=0)
        column = torch.softmax(sims[:, i], dim=0)
        ce = -math.log(row[i]) - math.log(column[i])
        rce = sum(-math.log(eps) * (1 - p[i]) - math.log(1 - eps) * p[i] for p in (row, column))
        assert float(got[i]) == pytest.approx((ce + float(rce)) / 2, rel=1e-6)


def test_gradients_reach_the_query_side_and_the_refiner_only():
    torch.manual_seed(0)
    refiner = GraphRefiner(4)
    queries = torch.randn(3, 4, requires_grad=True)
    memory = PairMemory(8, 4)
    memory.add(torch.randn(8, 4), torch.randn(8, 4))
    images, texts = memory.rows()
    neighbour_target_loss(queries, refiner(nearest_partners(queries, images, texts, 2))).sum().backward()
    assert queries.grad is not None and queries.grad.abs().sum() > 0
    assert all(p.grad is not None for p in refiner.parameters())

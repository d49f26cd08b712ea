"""Triplet, InfoNCE and reverse cross-entropy against explicit loops over pairs, in float64."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mispair.losses.info_nce import generalized_info_nce_loss, info_nce_loss, reverse_cross_entropy
from mispair.losses.triplet import triplet_loss


def loop_triplet(S, m, hardest):
    n, out = len(S), []
    for i in range(n):
        i2t = [torch.clamp(m[i] - S[i][i] + S[i][j], min=0) for j in range(n) if j != i]
        t2i = [torch.clamp(m[i] - S[i][i] + S[j][i], min=0) for j in range(n) if j != i]
        reduce = (lambda xs: max(xs, key=lambda x: x.detach().item())) if hardest else sum
        out.append(reduce(i2t) + reduce(t2i) if n > 1 else S[i][i] * 0)
    return torch.stack(out)


def _log_probs(S, i, tau, rows):  # log-softmax over candidates j of query i, rows (i2t) or columns
    logits = [(S[i][j] if rows else S[j][i]) / tau for j in range(len(S))]
    top = max(x.detach().item() for x in logits)  # shifted: exp never overflows, the sum is >= 1
    log_z = torch.log(sum(torch.exp(x - top) for x in logits))
    return [x - top - log_z for x in logits]


def _probs(S, i, tau, rows):
    return [torch.exp(x) for x in _log_probs(S, i, tau, rows)]


def loop_info_nce(S, tau):
    return torch.stack(
        [-_log_probs(S, i, tau, True)[i] - _log_probs(S, i, tau, False)[i] for i in range(len(S))]
    )


def loop_generalized_info_nce(S, tau, q):  # Zhang & Sabuncu's L_q(p) = (1 - p^q) / q, each direction
    return torch.stack(
        [sum((1 - _probs(S, i, tau, rows)[i] ** q) / q for rows in (True, False)) for i in range(len(S))]
    )


def loop_rce(S, tau, eps):
    y = lambda i, j: 1 - eps if i == j else eps  # noqa: E731 - the bounded one-hot target
    return torch.stack(
        [
            sum(
                -p * math.log(y(i, j))
                for rows in (True, False)
                for j, p in enumerate(_probs(S, i, tau, rows))
            )
            for i in range(len(S))
        ]
    )


def _close(a, b):
    assert a.shape == b.shape and torch.isclose(a, b, rtol=1e-6, atol=1e-12).all(), (a, b)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 6),
    seed=st.integers(0, 10**6),
    scale=st.sampled_from([0.3, 1.0, 5.0]),
    per_sample=st.booleans(),
    tau=st.sampled_from([0.05, 0.5]),
    q=st.sampled_from([0.3, 0.7, 1.0]),
)
def test_losses_match_loops(n, seed, scale, per_sample, tau, q):
    gen = torch.Generator().manual_seed(seed)
    sims = (scale * torch.randn(n, n, generator=gen, dtype=torch.float64)).requires_grad_()
    margin = torch.rand(n, generator=gen, dtype=torch.float64) if per_sample else 0.2
    m = margin if per_sample else torch.full((n,), 0.2, dtype=torch.float64)
    cases = [
        (lambda S: triplet_loss(S, margin), lambda S: loop_triplet(S, m, False)),
        (lambda S: triplet_loss(S, margin, negatives="hardest"), lambda S: loop_triplet(S, m, True)),
        (lambda S: info_nce_loss(S, tau), lambda S: loop_info_nce(S, tau)),
        (lambda S: generalized_info_nce_loss(S, tau, q), lambda S: loop_generalized_info_nce(S, tau, q)),
        (lambda S: reverse_cross_entropy(S, tau, 1e-3), lambda S: loop_rce(S, tau, 1e-3)),
    ]
    for fast, slow in cases:
        got, want = fast(sims), slow(sims)
        _close(got, want)
        weights = torch.rand(n, generator=gen, dtype=torch.float64)  # check d(w·loss)/dS too
        (g_fast,) = torch.autograd.grad((weights * got).sum(), sims)
        (g_slow,) = torch.autograd.grad((weights * want).sum(), sims, allow_unused=True)
        assert torch.isfinite(g_fast).all()
        _close(g_fast, torch.zeros_like(sims) if g_slow is None else g_slow)


@pytest.mark.parametrize(
    "loss",
    [
        lambda S: triplet_loss(S),
        lambda S: triplet_loss(S, negatives="hardest"),
        lambda S: triplet_loss(S, torch.tensor([0.5])),
        info_nce_loss,
    ],
)
def test_batch_of_one_is_zero_and_differentiable(loss):
    sims = torch.tensor([[0.7]], requires_grad=True)
    out = loss(sims)
    assert out.shape == (1,) and out.item() == 0.0
    out.sum().backward()
    assert sims.grad is not None and torch.isfinite(sims.grad).all()


def test_generalized_info_nce_tends_to_info_nce_and_weighs_each_pull_by_its_probability():
    gen = torch.Generator().manual_seed(0)
    sims = torch.randn(5, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    _close(generalized_info_nce_loss(sims, 0.2, 1e-9), info_nce_loss(sims, 0.2))  # q -> 0
    i2t = torch.log_softmax(sims / 0.2, dim=1).diagonal()  # one direction: d L_q / d S = p^q d CE / d S
    (robust,) = torch.autograd.grad(((1 - i2t.exp() ** 0.5) / 0.5)[2], sims, retain_graph=True)
    (plain,) = torch.autograd.grad(-i2t[2], sims)
    _close(robust, i2t[2].exp().detach() ** 0.5 * plain)


def test_extreme_similarities_keep_gradients_finite():
    sims = torch.tensor([[1.0, -1.0, 1.0], [1.0, 1.0, -1.0], [-1.0, 1.0, 1.0]], requires_grad=True)
    losses = (info_nce_loss(sims, 0.001), generalized_info_nce_loss(sims, 0.001, 0.5))
    for loss in (*losses, reverse_cross_entropy(sims, 0.001), triplet_loss(sims, 0.2)):
        assert torch.isfinite(loss).all()
        (grad,) = torch.autograd.grad(loss.sum(), sims)
        assert torch.isfinite(grad).all()

"""Masks (padding, arbitrary), float32 at small reg, and hypothesis-driven random problems."""

from __future__ import annotations

import ot
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mispair.ot import sinkhorn

from .conftest import cosine_cost, random_problem


def _pad(cost, a, b, rows, cols):
    """Pad problem ``k`` to keep only its first ``rows[k]`` rows and ``cols[k]`` columns."""
    n, m = cost.shape[1:]
    keep_r = torch.arange(n) < torch.as_tensor(rows)[:, None]
    keep_c = torch.arange(m) < torch.as_tensor(cols)[:, None]
    a = torch.where(keep_r, a, 0)
    b = torch.where(keep_c, b, 0)
    a, b = a / a.sum(1, keepdim=True), b / b.sum(1, keepdim=True)
    mask = keep_r[:, :, None] & keep_c[:, None, :]
    return torch.where(mask, cost, torch.nan), a, b, mask


def test_padding_matches_unpadded_pot_problems():
    cost, a, b = random_problem(3, 6, 5, seed=11)
    rows, cols = [6, 3, 4], [2, 5, 4]
    pc, pa, pb, mask = _pad(cost, a, b, rows, cols)
    res = sinkhorn(pc, pa, pb, 0.1, mask=mask, tol=1e-12, n_iter=5000)
    assert torch.isfinite(res.plan).all() and (res.plan[~mask] == 0).all()
    for k, (r, c) in enumerate(zip(rows, cols)):
        ref = ot.solve(pc[k, :r, :c], pa[k, :r], pb[k, :c], reg=0.1, max_iter=5000, tol=1e-13)
        torch.testing.assert_close(res.plan[k, :r, :c], ref.plan, atol=1e-6, rtol=0)


def test_fully_masked_rows_and_columns_give_no_nan_even_in_gradients():
    cost, a, b = random_problem(2, 5, 4, seed=12, dtype=torch.float32)
    mask = torch.ones(2, 5, 4, dtype=torch.bool)
    mask[0, 2] = False  # a row with mass but nowhere to go
    mask[1, :, 1] = False  # a column with mass but nowhere to come from
    mask[1, 4] = False
    for method in ("log", "kernel", "auto"):
        for grad in ("detach", "autodiff", "envelope"):
            c = cost.clone().requires_grad_(True)
            res = sinkhorn(c, a, b, 0.05, mask=mask, n_iter=30, grad=grad, method=method)
            (res.value.sum() + (res.plan * torch.rand_like(res.plan)).sum()).backward()
            assert torch.isfinite(res.plan).all() and torch.isfinite(res.value).all()
            assert (res.plan[~mask] == 0).all()
            assert torch.isfinite(c.grad).all() and (c.grad[~mask] == 0).all()


def test_all_masked_problem_is_zero():
    cost, a, b = random_problem(2, 3, 3, seed=13)
    mask = torch.zeros(2, 3, 3, dtype=torch.bool)
    mask[1] = True
    res = sinkhorn(cost, a, b, 0.1, mask=mask, tol=1e-9)
    assert (res.plan[0] == 0).all() and res.value[0] == 0 and torch.isfinite(res.plan).all()


def test_float32_small_reg_large_costs_regression():
    """POT issue #723: kernel-domain Sinkhorn underflows in float32 at reg 0.005 on [0, 2]."""
    cost = cosine_cost(8, 30, 20, seed=14)  # [0, 2]
    assert torch.exp(-cost / 0.005).min() == 0  # the naive kernel underflows here
    for scale, n_iter in ((1.0, 3000), (50.0, 300)):  # costs up to 2, then up to 100
        res = sinkhorn(cost * scale, None, None, 0.005, tol=1e-4, n_iter=n_iter)
        assert res.method == "log"
        assert torch.isfinite(res.plan).all() and torch.isfinite(res.value).all()
        torch.testing.assert_close(res.plan.sum((1, 2)), torch.ones(8), atol=1e-3, rtol=0)
        torch.testing.assert_close(res.plan.sum(1), torch.full((8, 20), 1 / 20), atol=1e-3, rtol=0)
        assert torch.isfinite(res.error).all()
    assert (res.error <= 0.1).all()  # at cost/reg = 2e4, 300 iterations are far from converged
    res = sinkhorn(cost, None, None, 0.005, tol=1e-4, n_iter=3000)
    assert (res.error <= 1e-4).all()


@settings(max_examples=25, deadline=None)
@given(
    bsz=st.integers(1, 4),
    n=st.integers(1, 7),
    m=st.integers(1, 7),
    seed=st.integers(0, 2**16),
    reg=st.sampled_from([0.01, 0.05, 0.5]),
)
def test_random_padded_problems(bsz, n, m, seed, reg):
    gen = torch.Generator().manual_seed(seed)
    cost, a, b = random_problem(bsz, n, m, seed=seed)
    rows = torch.randint(1, n + 1, (bsz,), generator=gen)
    cols = torch.randint(1, m + 1, (bsz,), generator=gen)
    pc, pa, pb, mask = _pad(cost, a, b, rows, cols)
    # some problems at reg 0.01 need ~26K iterations to reach 1e-9 (found by hypothesis)
    res = sinkhorn(pc, pa, pb, reg, mask=mask, tol=1e-9, n_iter=100_000)
    assert (res.error <= 1e-9).all()
    assert torch.isfinite(res.plan).all() and (res.plan[~mask] == 0).all()
    torch.testing.assert_close(res.plan.sum(2), pa, atol=1e-8, rtol=0)
    torch.testing.assert_close(res.plan.sum(1), pb, atol=1e-8, rtol=0)
    kern = sinkhorn(pc, pa, pb, reg, mask=mask, tol=1e-9, n_iter=100_000, method="kernel")
    torch.testing.assert_close(kern.plan, res.plan, atol=1e-7, rtol=0)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 6),
    m=st.integers(1, 6),
    seed=st.integers(0, 2**16),
    density=st.floats(0.0, 1.0),
)
def test_random_masks_never_nan(n, m, seed, density):
    gen = torch.Generator().manual_seed(seed)
    cost, a, b = random_problem(3, n, m, seed=seed, dtype=torch.float32)
    mask = torch.rand(3, n, m, generator=gen) < density
    c = cost.requires_grad_(True)
    res = sinkhorn(c, a, b, 0.02, mask=mask, n_iter=20, grad="autodiff")
    res.value.sum().backward()
    assert torch.isfinite(res.plan).all() and torch.isfinite(c.grad).all()
    assert (res.plan[~mask] == 0).all()
    assert (res.plan.sum(1) <= b + 1e-5).all()  # columns are exact where feasible


def test_autodiff_through_a_wide_kernel_range_stays_finite():
    """Regression (found by hypothesis): one row, costs spanning ~49 ε in float32. The forward
    kernel iterations are exact, but backpropagating through ``u = a / (K v)`` squares a sum near
    1e-22 and overflowed to NaN; ``auto`` now takes the log domain for such problems."""
    cost = torch.tensor([[[0.0072, 0.0390, 0.9929, 0.9131]]])
    b = torch.tensor([[0.1042, 0.3155, 0.2275, 0.3528]])
    grads = []
    for method in ("auto", "log"):
        c = cost.clone().requires_grad_(True)
        sinkhorn(c, None, b, 0.02, n_iter=20, grad="autodiff", method=method).value.sum().backward()
        grads.append(c.grad)
    assert torch.isfinite(grads[0]).all()
    torch.testing.assert_close(grads[0], grads[1])
    # the forward-only modes keep the kernel domain for the same problem
    assert sinkhorn(cost, None, b, 0.02, n_iter=20).method == "kernel"

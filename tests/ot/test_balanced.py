"""Balanced Sinkhorn against POT, marginals, invariances, kernel vs log domain."""

from __future__ import annotations

import importlib

import numpy as np
import ot
import pytest
import torch

from mispair.ot import sinkhorn

from .conftest import cosine_cost, random_problem

REG = 0.1


@pytest.mark.parametrize("method", ["log", "kernel", "auto"])
def test_matches_pot_solve_batch(method):
    cost, a, b = random_problem(6, 7, 5, seed=1)
    res = sinkhorn(cost, a, b, REG, tol=1e-12, n_iter=5000, method=method)
    ref = ot.solve_batch(cost, REG, a, b, max_iter=5000, tol=1e-13, method="log_sinkhorn")
    torch.testing.assert_close(res.plan, ref.plan, atol=1e-6, rtol=0)
    torch.testing.assert_close(res.value, ref.value, atol=1e-6, rtol=0)
    torch.testing.assert_close(res.value_linear, ref.value_linear, atol=1e-6, rtol=0)


def test_matches_pot_per_problem():
    cost, a, b = random_problem(4, 6, 9, seed=2)
    res = sinkhorn(cost, a, b, REG, tol=1e-12, n_iter=5000)
    for k in range(4):
        ref = ot.sinkhorn(
            a[k].numpy(),
            b[k].numpy(),
            cost[k].numpy(),
            REG,
            method="sinkhorn_log",
            numItermax=5000,
            stopThr=1e-13,
        )
        np.testing.assert_allclose(res.plan[k].numpy(), ref, atol=1e-6, rtol=0)


def test_marginals_hold_and_potentials_give_plan():
    cost, a, b = random_problem(5, 8, 6, seed=3)
    res = sinkhorn(cost, a, b, 0.05, tol=1e-10, n_iter=5000)
    torch.testing.assert_close(res.plan.sum(2), a, atol=1e-8, rtol=0)
    torch.testing.assert_close(res.plan.sum(1), b, atol=1e-10, rtol=0)
    assert (res.error <= 1e-10).all()
    f, g = res.potentials
    torch.testing.assert_close(res.plan, torch.exp((f[:, :, None] + g[:, None] - cost) / 0.05))


def test_permuting_rows_and_columns_permutes_plan():
    cost, a, b = random_problem(3, 6, 5, seed=4)
    pr, pc = torch.randperm(6), torch.randperm(5)
    res = sinkhorn(cost, a, b, REG, tol=1e-12, n_iter=5000)
    perm = sinkhorn(cost[:, pr][:, :, pc], a[:, pr], b[:, pc], REG, tol=1e-12, n_iter=5000)
    torch.testing.assert_close(perm.plan, res.plan[:, pr][:, :, pc], atol=1e-10, rtol=0)
    torch.testing.assert_close(perm.value, res.value)


def test_batch_order_does_not_matter():
    cost, a, b = random_problem(5, 4, 4, seed=5)
    order = torch.tensor([3, 0, 4, 1, 2])
    res = sinkhorn(cost, a, b, REG, n_iter=50)
    sub = sinkhorn(cost[order], a[order], b[order], REG, n_iter=50)
    torch.testing.assert_close(sub.plan, res.plan[order])


def test_tolerance_mode_stops_converged_problems_early():
    cost, a, b = random_problem(4, 6, 6, seed=6)
    cost[0] = 0.0  # uniform cost: converges after one iteration
    res = sinkhorn(cost, a, b, REG, tol=1e-9, n_iter=2000)
    assert res.n_iter[0] < res.n_iter[1:].min()
    assert (res.error <= 1e-9).all()
    fixed = sinkhorn(cost, a, b, REG, n_iter=int(res.n_iter.max()))
    torch.testing.assert_close(res.plan, fixed.plan, atol=1e-9, rtol=0)


def test_fixed_mode_runs_exactly_n_iter():
    cost, a, b = random_problem(2, 3, 3, seed=7)
    res = sinkhorn(cost, a, b, REG, n_iter=7)
    assert res.n_iter.tolist() == [7, 7]


@pytest.mark.parametrize("reg", [0.02, 0.05])
def test_kernel_agrees_with_log_in_float32(reg):
    cost = cosine_cost(64, 49, 16, seed=8)
    kern = sinkhorn(cost, None, None, reg, n_iter=200, method="kernel")
    log = sinkhorn(cost, None, None, reg, n_iter=200, method="log")
    assert kern.method == "kernel" and log.method == "log"
    torch.testing.assert_close(kern.plan, log.plan, atol=2e-6, rtol=0)
    torch.testing.assert_close(kern.value, log.value, atol=1e-5, rtol=0)


def test_auto_splits_batch_by_cost_range():
    cost = cosine_cost(4, 10, 8, seed=9, dtype=torch.float64) * 0.5  # range <= 1
    cost[1] *= 1000.0  # range/reg far beyond float64's kernel limit
    res = sinkhorn(cost, None, None, 0.02, tol=1e-9, n_iter=3000)
    ref = sinkhorn(cost, None, None, 0.02, tol=1e-9, n_iter=3000, method="log")
    assert res.method == "mixed"
    assert torch.isfinite(res.plan).all()
    torch.testing.assert_close(res.plan, ref.plan, atol=1e-8, rtol=0)
    torch.testing.assert_close(res.n_iter, ref.n_iter)


def test_auto_picks_kernel_for_cosine_costs_at_omit_reg():
    cost = cosine_cost(8, 49, 16, seed=10) * 0.75  # realistic range < 1.6 at reg 0.02
    assert sinkhorn(cost, None, None, 0.02, n_iter=5).method == "kernel"


def test_bad_arguments_raise():
    cost, a, b = random_problem(1, 2, 2)
    for kwargs in ({"grad": "exact"}, {"method": "fast"}):
        with pytest.raises(ValueError):
            sinkhorn(cost, a, b, REG, **kwargs)
    with pytest.raises(ValueError):
        sinkhorn(cost, a, b, 0.0)
    with pytest.raises(ValueError):
        sinkhorn(cost[0], a, b, REG)


@pytest.mark.parametrize("tol", [None, 1e-7])
def test_cpu_chunks_give_the_unchunked_result(monkeypatch, tol):
    solver = importlib.import_module("mispair.ot.sinkhorn")  # the module, not the function
    cost, a, b = random_problem(7, 5, 4, seed=11)
    a[2, -2:] = 0.0  # padding rows in one problem
    a[2] /= a[2].sum()
    whole = sinkhorn(cost, a, b, REG, n_iter=300, tol=tol)
    monkeypatch.setattr(solver, "CPU_CHUNK_ELEMENTS", 2 * 5 * 4)  # chunks of 2 problems
    parts = sinkhorn(cost, a, b, REG, n_iter=300, tol=tol)
    for field in ("plan", "value", "n_iter", "error", "value_linear"):
        torch.testing.assert_close(getattr(parts, field), getattr(whole, field), rtol=0, atol=0)


def test_chunks_keep_gradients(monkeypatch):
    solver = importlib.import_module("mispair.ot.sinkhorn")  # the module, not the function
    cost, a, b = random_problem(5, 4, 3, seed=12)
    cost.requires_grad_(True)
    grad_whole = torch.autograd.grad(sinkhorn(cost, a, b, REG, n_iter=50).value.sum(), cost)[0]
    monkeypatch.setattr(solver, "CPU_CHUNK_ELEMENTS", 12)
    grad_parts = torch.autograd.grad(sinkhorn(cost, a, b, REG, n_iter=50).value.sum(), cost)[0]
    torch.testing.assert_close(grad_parts, grad_whole, rtol=0, atol=0)


def test_kernel_is_exact_at_the_edge_of_its_float32_range():
    from mispair.ot._domains import kernel_limit

    n, m, reg = 40, 30, 0.01
    spread = kernel_limit(torch.float32) - float(np.log(n)) - 0.5  # just inside the limit
    gen = torch.Generator().manual_seed(13)
    cost = torch.rand(3, n, m, generator=gen) * spread * reg
    cost[:, :, 0], cost[:, :, 1] = 0.0, spread * reg  # every row spans the whole range
    kern = sinkhorn(cost, None, None, reg, n_iter=500, method="kernel")
    assert sinkhorn(cost, None, None, reg, n_iter=1).method == "kernel"
    ref = sinkhorn(cost.double(), None, None, reg, n_iter=500, method="log")
    assert torch.isfinite(kern.plan).all() and torch.isfinite(kern.value).all()
    torch.testing.assert_close(kern.plan.double(), ref.plan, atol=1e-6, rtol=0)

"""The three gradient modes: finite, and consistent with each other at convergence."""

from __future__ import annotations

import pytest
import torch

from mispair.ot import sinkhorn

from .conftest import random_problem


def _grads(grad, n_iter=300, method="log", partial_mass=None):
    cost, a, b = random_problem(3, 6, 5, seed=21)
    cost.requires_grad_(True)
    res = sinkhorn(cost, a, b, 0.1, n_iter=n_iter, grad=grad, method=method, partial_mass=partial_mass)
    (g,) = torch.autograd.grad(res.value.sum(), cost)
    return res, g


@pytest.mark.parametrize("grad", ["detach", "autodiff", "envelope"])
@pytest.mark.parametrize("method", ["log", "kernel"])
def test_gradients_finite_in_every_mode(grad, method):
    cost, a, b = random_problem(2, 5, 4, seed=22, dtype=torch.float32)
    cost.requires_grad_(True)
    res = sinkhorn(cost, a, b, 0.02, n_iter=20, grad=grad, method=method)
    loss = res.value.sum() + res.value_linear.sum()
    if grad != "envelope":
        loss = loss + (res.plan * torch.randn_like(res.plan)).sum()
    loss.backward()
    assert torch.isfinite(cost.grad).all() and cost.grad.abs().sum() > 0


@pytest.mark.parametrize("partial_mass", [None, 0.4])
def test_envelope_gradient_is_plan_and_matches_autodiff(partial_mass):
    env, g_env = _grads("envelope", partial_mass=partial_mass)
    _, g_auto = _grads("autodiff", partial_mass=partial_mass)
    det, g_det = _grads("detach", partial_mass=partial_mass)
    torch.testing.assert_close(g_env, env.plan, atol=1e-12, rtol=0)
    torch.testing.assert_close(g_auto, g_env, atol=1e-7, rtol=0)
    torch.testing.assert_close(g_det, g_env, atol=1e-12, rtol=0)
    assert not env.plan.requires_grad and det.plan.requires_grad


def test_detach_plan_gradient_is_one_step_jacobian():
    """With fixed row potentials, d plan_ij / d C_ij differs from -plan/reg by the column step."""
    cost, a, b = random_problem(1, 4, 3, seed=23)
    cost.requires_grad_(True)
    res = sinkhorn(cost, a, b, 0.1, tol=1e-12, n_iter=5000, grad="detach")
    (g,) = torch.autograd.grad(res.plan[0, 1, 2], cost)
    p = res.plan.detach()[0]
    expected = torch.zeros(4, 3, dtype=cost.dtype)
    expected[:, 2] = p[1, 2] * p[:, 2] / b[0, 2] / 0.1  # column renormalisation
    expected[1, 2] -= p[1, 2] / 0.1
    torch.testing.assert_close(g[0], expected)


def test_autodiff_matches_finite_differences():
    cost, a, b = random_problem(1, 3, 3, seed=24)
    cost.requires_grad_(True)

    def f(c):
        return sinkhorn(c, a, b, 0.2, n_iter=15, grad="autodiff").value_linear.sum()

    assert torch.autograd.gradcheck(f, (cost,))

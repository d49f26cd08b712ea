"""Partial transport via dummy points (L2RM Eq. 12–14) against POT."""

from __future__ import annotations

import numpy as np
import ot
import pytest
import torch

from mispair.ot import partial_extension, positive_pair_mask, sinkhorn

from .conftest import random_problem


def test_extension_layout_matches_eq_12_13():
    cost, a, b = random_problem(2, 3, 4, seed=31)
    mask = positive_pair_mask(3, 4)
    ce, ae, be, me = partial_extension(cost, a, b, 0.3, mask=mask, xi=0.5, big=7.0)
    assert ce.shape == (2, 4, 5) and me.shape == (2, 4, 5)
    torch.testing.assert_close(ce[:, :3, :4], cost)
    assert (ce[:, :3, 4] == 0.5).all() and (ce[:, 3, :4] == 0.5).all() and (ce[:, 3, 4] == 8.0).all()
    assert (me[:, :3, :4] == mask).all() and me[:, 3].all() and me[:, :, 4].all()
    torch.testing.assert_close(ae[:, 3], b.sum(1) - 0.3)
    torch.testing.assert_close(be[:, 4], a.sum(1) - 0.3)
    torch.testing.assert_close(ae.sum(1), be.sum(1))


@pytest.mark.parametrize("masked", [False, True])
def test_partial_equals_pot_balanced_on_extended_problem(masked):
    cost, a, b = random_problem(3, 6, 5, seed=32)
    mask = positive_pair_mask(6, 5) if masked else None
    res = sinkhorn(cost, a, b, 0.05, partial_mass=0.5, mask=mask, tol=1e-12, n_iter=20000)
    ce, ae, be, me = partial_extension(cost, a, b, 0.5, mask=mask)
    ce = torch.where(me, ce, 1e3)  # POT has no mask: forbid entries by cost (e^{-2e4} = 0)
    ref = ot.solve_batch(ce, 0.05, ae, be, max_iter=20000, tol=1e-13, method="log_sinkhorn")
    torch.testing.assert_close(res.plan, ref.plan[:, :6, :5], atol=1e-6, rtol=0)
    torch.testing.assert_close(res.value_linear, (ref.plan[:, :6, :5] * cost).sum((1, 2)))
    torch.testing.assert_close(
        res.plan.sum((1, 2)), torch.full((3,), 0.5, dtype=torch.float64), atol=1e-6, rtol=0
    )
    assert (res.plan.sum(2) <= a + 1e-9).all() and (res.plan.sum(1) <= b + 1e-9).all()
    if masked:
        assert (res.plan[:, torch.arange(5), torch.arange(5)] == 0).all()


@pytest.mark.parametrize("masked", [False, True])
def test_small_reg_approaches_pot_exact_partial_lp(masked):
    cost, a, b = random_problem(2, 6, 6, seed=33)
    mask = positive_pair_mask(6) if masked else None
    res = sinkhorn(cost, a, b, 1e-3, partial_mass=0.4, mask=mask, xi=0.0, tol=1e-7, n_iter=3000)
    for k in range(2):
        m = cost[k].numpy() + (1e2 * np.eye(6) if masked else 0.0)
        lp = ot.partial.partial_wasserstein(a[k].numpy(), b[k].numpy(), m, m=0.4)
        assert abs(res.value_linear[k].item() - float((lp * m).sum())) < 1e-3
        assert abs(res.plan[k].sum().item() - 0.4) < 1e-3  # slow Sinkhorn near an LP


def test_xi_does_not_change_the_plan():
    cost, a, b = random_problem(2, 5, 5, seed=34)
    one = sinkhorn(cost, a, b, 0.05, partial_mass=0.3, xi=0.1, tol=1e-12, n_iter=20000)
    two = sinkhorn(cost, a, b, 0.05, partial_mass=0.3, xi=3.0, tol=1e-12, n_iter=20000)
    torch.testing.assert_close(one.plan, two.plan, atol=1e-9, rtol=0)
    shift = (3.0 - 0.1) * (a.sum(1) + b.sum(1) - 0.6)
    torch.testing.assert_close(two.value - one.value, shift)


def test_l2rm_batch_in_float32_at_small_reg():
    """One masked 129 x 129 problem (128 pairs + dummy), L2RM's λ = 0.01, ρ = 0.1."""
    gen = torch.Generator().manual_seed(35)
    cost = torch.rand(1, 128, 128, generator=gen)
    uni = torch.full((1, 128), 1 / 128)
    res = sinkhorn(
        cost,
        uni,
        uni,
        0.01,
        partial_mass=0.1,
        mask=positive_pair_mask(128),
        tol=1e-6,
        n_iter=2000,
    )
    assert torch.isfinite(res.plan).all() and res.method == "log"
    assert abs(res.plan.sum().item() - 0.1) < 1e-4
    assert res.plan.diagonal(dim1=1, dim2=2).abs().max() == 0

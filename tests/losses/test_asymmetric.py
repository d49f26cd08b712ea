"""ASL asymmetric dynamic matching loss: brute force, gradient signs, the paper's central claim."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mispair.losses.asymmetric import asymmetric_loss, soft_boundary
from mispair.losses.triplet import triplet_loss


def _loop_direction(s: list[list[float]], i: int, sigma: float, m0: float, lam: float) -> float:
    """ASL Eq. 5–6 for the anchor of row i, with plain floats."""
    mu_p = max(sigma * (1 + m0) - s[i][i], 0.0)
    pos = math.exp(-lam * mu_p * (s[i][i] - (1 - m0)))
    neg = 0.0
    for j in range(len(s)):
        if j != i:
            mu_n = max(s[i][j] - (-m0), 0.0)
            neg += math.exp(lam * mu_n * (s[i][j] - m0))
    return math.log1p(pos * neg)


def _loop_loss(sims: torch.Tensor, labels: list[float], m0: float, lam: float, z: float):
    rows, cols = sims.tolist(), sims.t().tolist()
    out = []
    for i, y in enumerate(labels):
        sigma = (z**y - 1) / (z - 1)
        out.append(_loop_direction(rows, i, sigma, m0, lam) + _loop_direction(cols, i, sigma, m0, lam))
    return torch.tensor(out, dtype=torch.float64)


def _sims(n: int, seed: int = 0, low: float = -1.0, high: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return low + (high - low) * torch.rand(n, n, generator=g, dtype=torch.float64)


@pytest.mark.parametrize(("m0", "lam", "z"), [(0.2, 64.0, 3.0), (0.1, 16.0, 5.0), (0.3, 2.0, 2.0)])
def test_matches_loop(m0, lam, z):
    sims = _sims(6, seed=1)
    labels = torch.rand(6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    got = asymmetric_loss(sims, labels, m0=m0, scale=lam, z=z)
    assert got.shape == (6,)
    expected = _loop_loss(sims, labels.tolist(), m0, lam, z)
    assert torch.allclose(got, expected, rtol=1e-6, atol=1e-12)


def test_no_labels_means_ideal_boundary():
    sims = _sims(5, seed=3)
    assert torch.equal(asymmetric_loss(sims), asymmetric_loss(sims, torch.ones(5, dtype=sims.dtype)))


def test_soft_boundary():
    y = torch.tensor([0.0, 0.5, 1.0])
    assert torch.allclose(soft_boundary(y, 3.0), torch.tensor([0.0, (3**0.5 - 1) / 2, 1.0]))
    assert torch.equal(soft_boundary(y, 1.0), y)
    with pytest.raises(ValueError):
        soft_boundary(y, 0.0)


@pytest.mark.parametrize("detach", [True, False])
def test_gradient_signs_inside_the_boundaries(detach):
    # ŷ = 1 and every similarity inside (U_n, U_p) = (−0.2, 1.2); positives in (0, 1) and, for
    # the non-detached variant (whose μ_n-gradient pulls S ∈ (−m0, 0) towards 0), negatives > 0
    low = -0.15 if detach else 0.05
    sims = _sims(6, seed=4, low=low, high=0.95).requires_grad_(True)
    asymmetric_loss(sims, scale=16.0, detach_weights=detach).sum().backward()
    eye = torch.eye(6, dtype=torch.bool)
    assert (sims.grad[eye] < 0).all()  # positives pulled up
    assert (sims.grad[~eye] > 0).all()  # negatives pushed down


def test_non_detached_gradients_are_the_papers():
    # the gradients printed below Eq. 6, per direction with A = 1 − e^{−l}:
    #   ∂l/∂S_p = λA(2 S_p − σU_p − m_p),   ∂l/∂S_nj = 2λA · softmax_j(λ(S_n² − m0²)) · S_nj
    m0, lam, y, z = 0.2, 8.0, 0.7, 3.0
    sigma_up = (z**y - 1) / (z - 1) * (1 + m0)  # 0.69: μ_p = σU_p − S_p > 0 below
    sims = torch.tensor([[0.6, 0.3], [0.1, 0.9]], dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([y, 1.0], dtype=torch.float64)
    asymmetric_loss(sims, labels, m0=m0, scale=lam, z=z, detach_weights=False)[0].backward()

    def paper_grads(s_p: float, s_n: float) -> tuple[float, float]:
        exponent = lam * (s_p - sigma_up) * (s_p - (1 - m0)) + lam * (s_n**2 - m0**2)
        a = 1 - math.exp(-math.log1p(math.exp(exponent)))
        return lam * a * (2 * s_p - sigma_up - (1 - m0)), 2 * lam * a * s_n  # one negative

    pos_i2t, neg_i2t = paper_grads(0.6, 0.3)  # image 0: caption 1 is the negative, S_01
    pos_t2i, neg_t2i = paper_grads(0.6, 0.1)  # caption 0: image 1 is the negative, S_10
    assert sims.grad[0, 0].item() == pytest.approx(pos_i2t + pos_t2i, rel=1e-9)
    assert sims.grad[0, 1].item() == pytest.approx(neg_i2t, rel=1e-9)
    assert sims.grad[1, 0].item() == pytest.approx(neg_t2i, rel=1e-9)


def test_negative_gradient_survives_a_penalised_positive():
    # a noisy pair (ŷ = 0.1, σ ≈ 0.06) whose positive already clears its shrunk boundary
    sims = torch.tensor([[0.3, 0.15], [0.15, 0.3]], dtype=torch.float64)
    noisy = torch.tensor([0.1, 0.1], dtype=torch.float64)
    sigma = soft_boundary(noisy, 3.0)

    asl = sims.clone().requires_grad_(True)
    asymmetric_loss(asl, noisy).sum().backward()
    assert asl.grad[0, 0].item() == 0.0  # optimisation of the noisy positive has stopped (μ_p = 0)
    assert asl.grad[0, 1].item() > 0.1  # …but its negatives are still pushed down

    # the soft-margin triplet (ASL Eq. 2) with the same shrunk margin α' = σα
    tri = sims.clone().requires_grad_(True)
    triplet_loss(tri, sigma * 0.2).sum().backward()
    assert tri.grad[0, 1].item() == 0.0  # the negative's gradient vanishes with the positive's

    full = sims.clone().requires_grad_(True)  # with the full margin it was still being learned
    triplet_loss(full, 0.2).sum().backward()
    assert full.grad[0, 1].item() > 0


@pytest.mark.parametrize("detach", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_finite_at_scale_128(detach, dtype):
    sims = torch.tensor([[-1.0, 1.0, 1.0], [1.0, 1.0, -1.0], [1.0, -1.0, -1.0]], dtype=dtype)
    sims = torch.cat([sims, _sims(3, seed=5).to(dtype)], dim=1)
    sims = torch.cat([sims, _sims(3, seed=6).to(dtype).repeat(1, 2)], dim=0).requires_grad_(True)
    labels = torch.tensor([0.0, 1.0, 0.3, 1.0, 0.0, 0.9], dtype=dtype)
    loss = asymmetric_loss(sims, labels, scale=128.0, detach_weights=detach)
    loss.sum().backward()
    assert torch.isfinite(loss).all() and torch.isfinite(sims.grad).all()
    assert loss[0].item() > 100  # the violated pair (positive −1, negatives +1) is large, not inf


def test_batch_of_one_is_zero_and_backward_runs():
    sims = torch.ones(1, 1, requires_grad=True)
    loss = asymmetric_loss(sims)
    loss.sum().backward()
    assert loss.tolist() == [0.0]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 7), seed=st.integers(0, 2**16), data=st.data())
def test_permutation_equivariance(n, seed, data):
    perm = torch.tensor(data.draw(st.permutations(range(n))))
    sims = _sims(n, seed)
    labels = torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    got = asymmetric_loss(sims[perm][:, perm], labels[perm])
    assert torch.allclose(got, asymmetric_loss(sims, labels)[perm], rtol=1e-10)

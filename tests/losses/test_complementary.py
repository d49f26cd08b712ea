"""RCL complementary losses against explicit loops over anchors and negatives."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mispair.losses.complementary import (
    ABLATION_LOSSES,
    COMPLEMENTARY_KINDS,
    _log_one_minus_softmax,
    _negative_mask,
    complementary_loss,
    matching_probabilities,
    negative_learning_loss,
    rcl_ablation_loss,
)

PHI = {
    "mae": lambda p, q: p,
    "log": lambda p, q: -math.log1p(-p),  # log1p: the loop must not lose digits for small p
    "exp": lambda p, q: math.exp(-(1 - p)),
    "gce": lambda p, q: -math.expm1(q * math.log1p(-p)) / q,
    "tan": lambda p, q: math.tan(p),
}


def _loop_loss(sims: torch.Tensor, kind: str, tau: float, q: float, mask=None) -> torch.Tensor:
    """Eq. 14–18 per anchor k: Σ over negatives j of φ(p), image→text plus text→image."""
    s = sims.tolist()
    n = len(s)
    out = []
    for k in range(n):
        total = 0.0
        for j in range(n):
            if j == k or (mask is not None and not mask[k][j]):
                continue
            i2t = math.exp(s[k][j] / tau) / sum(math.exp(s[k][m] / tau) for m in range(n))
            t2i = math.exp(s[j][k] / tau) / sum(math.exp(s[m][k] / tau) for m in range(n))
            total += PHI[kind](i2t, q) + PHI[kind](t2i, q)
        out.append(total)
    return torch.tensor(out, dtype=torch.float64)


def _sims(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, n, generator=g, dtype=torch.float64) * 2 - 1


def test_matching_probabilities_rows_are_anchors():
    sims = _sims(4)
    p_i2t, p_t2i = matching_probabilities(sims, tau=0.1)
    assert torch.allclose(p_i2t.sum(1), torch.ones(4, dtype=torch.float64))
    assert torch.allclose(p_t2i, torch.softmax(sims / 0.1, dim=0).t())


@pytest.mark.parametrize("kind", COMPLEMENTARY_KINDS)
@pytest.mark.parametrize("tau", [0.05, 0.5])
def test_matches_loop(kind, tau):
    sims = _sims(6, seed=1)
    got = complementary_loss(sims, kind=kind, tau=tau, q=0.7)
    assert got.shape == (6,)
    assert torch.allclose(got, _loop_loss(sims, kind, tau, 0.7), rtol=1e-6, atol=0)


@pytest.mark.parametrize("kind", COMPLEMENTARY_KINDS)
def test_matches_loop_with_ratio(kind):
    sims = _sims(8, seed=2)
    got = complementary_loss(sims, kind=kind, ratio=0.5, generator=torch.Generator().manual_seed(3))
    mask = _negative_mask(8, 4, generator=torch.Generator().manual_seed(3)).tolist()
    assert torch.allclose(got, _loop_loss(sims, kind, 0.05, 0.5, mask), rtol=1e-6, atol=0)


def test_reduction_is_sum_over_negatives():
    # uniform probabilities 1/B: MAE of anchor k is (B − 1)/B per direction
    got = complementary_loss(torch.zeros(5, 5), kind="mae")
    assert torch.allclose(got, torch.full((5,), 2 * 4 / 5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", COMPLEMENTARY_KINDS)
def test_finite_values_and_gradients_when_p_near_one(kind, dtype):
    sims = torch.zeros(4, 4, dtype=dtype)
    sims[0, 1] = sims[2, 3] = 50.0  # logits of 1000: p = 1 − e^{−1000} rounds to 1
    sims[3, 0] = 1.5  # p close to, but not exactly, 1
    sims.requires_grad_(True)
    loss = complementary_loss(sims, kind=kind)
    loss.sum().backward()
    assert torch.isfinite(loss).all()
    assert torch.isfinite(sims.grad).all()


def test_log_one_minus_softmax_exact_at_saturation():
    logits = torch.tensor([[1000.0, 0.0, -3.0], [0.2, 0.1, 0.0]], dtype=torch.float64)
    got = _log_one_minus_softmax(logits)
    # 1 − p_0 = (e^0 + e^−3) / (e^1000 + …): log is log(1 + e^−3) − 1000
    assert math.isclose(got[0, 0].item(), math.log1p(math.exp(-3)) - 1000, rel_tol=1e-12)
    expected = torch.log1p(-torch.softmax(logits[1], dim=0))
    assert torch.allclose(got[1], expected, rtol=1e-12)
    assert got[0, 1].item() == 0.0  # p = e^−1000 underflows; log(1 − p) = 0


@pytest.mark.parametrize("kind", ["log", "gce"])
def test_float32_agrees_with_float64_near_saturation(kind):
    sims = _sims(5, seed=7)
    sims[1, 2] = sims[4, 0] = 3.0  # logits 60 above the rest: 1 − p ≈ e^−50, below float32 eps
    got = complementary_loss(sims.float(), kind=kind)
    assert torch.allclose(got.double(), complementary_loss(sims, kind=kind), rtol=1e-5)


def test_log_gradient_is_bounded_at_saturation():
    sims = torch.zeros(3, 3, dtype=torch.float64)
    sims[0, 1] = 50.0
    sims.requires_grad_(True)
    complementary_loss(sims, kind="log", tau=1.0).sum().backward()
    # −log(1 − p) ≈ S_01 − log(e^{S_00} + e^{S_02}) for image 0 and likewise for caption 1
    # (S_01 also dominates column 1): slope 1 in S_01 from each direction
    assert sims.grad[0, 1].item() == pytest.approx(2.0, abs=1e-6)


@pytest.mark.parametrize("ratio", [0.25, 0.5, 0.75])
def test_ratio_uses_floor_ratio_times_batch_negatives(ratio):
    n = 8
    count = int(ratio * n)
    # uniform probabilities: MAE of an anchor is count / n per direction
    got = complementary_loss(torch.zeros(n, n), kind="mae", ratio=ratio)
    assert torch.allclose(got, torch.full((n,), 2 * count / n))


def test_ratio_draws_negatives_uniformly():
    n, count, draws = 6, 2, 3000
    g = torch.Generator().manual_seed(0)
    freq = sum(_negative_mask(n, count, generator=g).double() for _ in range(draws)) / draws
    assert (freq.diagonal() == 0).all()
    off = freq[~torch.eye(n, dtype=torch.bool)]
    assert torch.allclose(off, torch.full_like(off, count / (n - 1)), atol=0.04)


def test_full_ratio_needs_no_randomness():
    sims = _sims(5)
    assert torch.equal(complementary_loss(sims), complementary_loss(sims, ratio=1.0))


def test_negative_learning_uses_one_negative():
    n = 7
    got = negative_learning_loss(torch.zeros(n, n), generator=torch.Generator().manual_seed(0))
    assert torch.allclose(got, torch.full((n,), -2 * math.log(1 - 1 / n)))
    mask = _negative_mask(n, 1, generator=torch.Generator().manual_seed(4))
    assert (mask.sum(1) == 1).all() and not mask.diagonal().any()


def test_negative_learning_matches_loop():
    sims = _sims(5, seed=5)
    got = negative_learning_loss(sims, generator=torch.Generator().manual_seed(9))
    mask = _negative_mask(5, 1, generator=torch.Generator().manual_seed(9)).tolist()
    assert torch.allclose(got, _loop_loss(sims, "log", 0.05, 1.0, mask), rtol=1e-6, atol=0)


def test_ablation_losses_dispatch():
    from mispair.losses.info_nce import info_nce_loss
    from mispair.losses.triplet import triplet_loss

    sims = _sims(5, seed=6)
    assert torch.equal(rcl_ablation_loss(sims, "TR"), triplet_loss(sims, 0.2))
    assert torch.equal(rcl_ablation_loss(sims, "tr_hn"), triplet_loss(sims, 0.2, negatives="hardest"))
    assert torch.equal(rcl_ablation_loss(sims, "CL", tau=0.1), info_nce_loss(sims, 0.1))
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    nl = negative_learning_loss(sims, generator=g2)
    assert torch.equal(rcl_ablation_loss(sims, "NL", generator=g1), nl)
    for name in ABLATION_LOSSES:
        assert rcl_ablation_loss(sims, name).shape == (5,)
    with pytest.raises(ValueError, match="name"):
        rcl_ablation_loss(sims, "ccl")


@pytest.mark.parametrize("kwargs", [{"kind": "l1"}, {"q": 0.0}, {"q": 1.5}, {"ratio": 0.0}])
def test_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        complementary_loss(torch.zeros(3, 3), **kwargs)


@pytest.mark.parametrize("kind", COMPLEMENTARY_KINDS)
def test_batch_of_one_is_zero_and_backward_runs(kind):
    sims = torch.ones(1, 1, requires_grad=True)
    loss = complementary_loss(sims, kind=kind)
    loss.sum().backward()
    assert loss.tolist() == [0.0]
    assert negative_learning_loss(sims).tolist() == [0.0]


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 7),
    seed=st.integers(0, 2**16),
    kind=st.sampled_from(COMPLEMENTARY_KINDS),
    data=st.data(),
)
def test_permutation_equivariance(n, seed, kind, data):
    perm = torch.tensor(data.draw(st.permutations(range(n))))
    sims = _sims(n, seed) * 3
    got = complementary_loss(sims[perm][:, perm], kind=kind, tau=0.1)
    assert torch.allclose(got, complementary_loss(sims, kind=kind, tau=0.1)[perm], rtol=1e-10)

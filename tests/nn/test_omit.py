"""OMIT and CAM heads against per-pair loops (Algorithm A1, POT, ``sinkhorn`` alone), Eq. 7 by
hand, padding, permutation equivariance, chunked evaluation and gradients."""

from __future__ import annotations

import math

import numpy as np
import ot
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor

from mispair.nn.allpairs import all_pair_similarities
from mispair.nn.embedding import Fragments, l2_normalize, masked_mean
from mispair.nn.heads import create_head
from mispair.nn.heads.omit import fragment_marginals
from mispair.ot import sinkhorn

VARIANTS = ["partial", "naive", "full", "prompt"]
MARGINALS = ["uni", "intra", "inter", "norm"]
DIM = 8


def images_of(n: int, k: int, seed: int, dtype=torch.float64, normalized: bool = True):
    gen = torch.Generator().manual_seed(seed)
    local = torch.randn(n, k, DIM, generator=gen, dtype=dtype)
    scale = 0.5 + torch.rand(n, k, 1, generator=gen, dtype=dtype)  # raw norms for Eq. 7 "norm"
    local = l2_normalize(local) if normalized else local * scale
    mask = torch.ones(n, k, dtype=torch.bool)
    return Fragments(local, mask, l2_normalize(masked_mean(l2_normalize(local), mask)))


def texts_of(lengths: list[int], seed: int, dtype=torch.float64, normalized=True, pad=0.0):
    gen = torch.Generator().manual_seed(seed)
    width = max(lengths) + 2  # extra padding columns
    local = torch.randn(len(lengths), width, DIM, generator=gen, dtype=dtype)
    if normalized:
        local = l2_normalize(local)
    mask = torch.arange(width)[None] < torch.tensor(lengths)[:, None]
    local = torch.where(mask[..., None], local, pad)  # padding holds `pad` (garbage if nonzero)
    return Fragments(local, mask, l2_normalize(masked_mean(l2_normalize(local), mask)))


def hand_marginals(kind: str, img: Fragments, i: int, txt: Fragments, j: int, tau: float = 1.0):
    """Eq. 7 for image ``i`` and caption ``j`` with Python loops over the real fragments."""
    n_regions, n_words = int(img.lengths[i]), int(txt.lengths[j])
    raw_v, raw_t = img.local[i, :n_regions], txt.local[j, :n_words]
    v, t = [x / x.norm() for x in raw_v], [x / x.norm() for x in raw_t]
    vg, tg = img.pooled[i] / img.pooled[i].norm(), txt.pooled[j] / txt.pooled[j].norm()

    def softmax(scores):
        e = [math.exp(s / tau) for s in scores]
        return [x / sum(e) for x in e]

    if kind == "uni":
        a, b = [1 / n_regions] * n_regions, [1 / n_words] * n_words
    elif kind == "intra":
        a, b = softmax([float(vg @ x) for x in v]), softmax([float(tg @ x) for x in t])
    elif kind == "inter":
        a, b = softmax([float(tg @ x) for x in v]), softmax([float(vg @ x) for x in t])
    else:
        na, nb = [float(x.norm()) for x in raw_v], [float(x.norm()) for x in raw_t]
        a, b = [x / sum(na) for x in na], [x / sum(nb) for x in nb]
    return torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)


def extended(variant, head, img, i, txt, j, a, b, rho=0.1):
    """Per-pair fragments and masses of Eq. 4 (or Eq. 1 for ``naive``)."""
    v = l2_normalize(img.local[i, : int(img.lengths[i])])
    t = l2_normalize(txt.local[j, : int(txt.lengths[j])])
    if variant == "naive":
        return v, t, a, b
    if variant == "prompt":
        vg, tg = l2_normalize(head.dustbins[0].detach()), l2_normalize(head.dustbins[1].detach())
    else:
        vg, tg = l2_normalize(img.pooled[i]), l2_normalize(txt.pooled[j])
    rho = torch.tensor([rho], dtype=a.dtype)
    v, t = torch.cat([vg[None], v]), torch.cat([tg[None], t])
    return v, t, torch.cat([rho, a]), torch.cat([rho, b])


def score_from_plan(variant: str, plan: Tensor, sims: Tensor) -> float:
    if variant in ("partial", "prompt"):
        plan, sims = plan[1:, 1:], sims[1:, 1:]
    return float((plan * sims).sum())


def algorithm_a1(cost: Tensor, a: Tensor, b: Tensor, reg: float, n_iter: int) -> Tensor:
    """OMIT Algorithm A1 / Eq. 3: Gibbs kernel, then row and column normalisations."""
    plan = torch.exp(-cost / reg)
    for _ in range(n_iter):
        plan = plan * (a / plan.sum(1))[:, None]
        plan = plan * (b / plan.sum(0))[None, :]
    return plan


def loop_similarities(head, img, txt, solve) -> Tensor:
    s = head.settings
    out = torch.zeros(len(img), len(txt), dtype=torch.float64)
    for i in range(len(img)):
        for j in range(len(txt)):
            a, b = hand_marginals(s.marginals, img, i, txt, j, s.marginal_tau)
            v, t, a, b = extended(s.variant, head, img, i, txt, j, a, b, s.dustbin_mass)
            sims = v @ t.t()
            out[i, j] = score_from_plan(s.variant, solve(1 - sims, a, b, s.reg), sims)
    return out


LENGTHS = [1, 4, 7, 2, 5]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("marginals", MARGINALS)
def test_head_matches_algorithm_a1_loop(variant, marginals):
    """The paper's 3 iterations: every pair alone through Algorithm A1, in float64."""
    img, txt = images_of(3, 6, 0, normalized=False), texts_of(LENGTHS, 1, normalized=False)
    torch.manual_seed(0)
    head = create_head("omit", DIM, variant=variant, marginals=marginals).double()
    expected = loop_similarities(head, img, txt, lambda c, a, b, reg: algorithm_a1(c, a, b, reg, 3))
    assert torch.allclose(head(img, txt), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("variant", ["partial", "naive", "full"])
@pytest.mark.parametrize("method", ["kernel", "log"])
def test_converged_head_matches_pot_and_sinkhorn_per_pair(variant, method):
    """Run to convergence, the head equals POT's ``ot.sinkhorn`` and ``sinkhorn`` on one pair.

    (λ = 0.1 here: at λ = 0.02 some dustbin problems need ~10⁵ iterations to converge.)
    """
    img, txt = images_of(3, 5, 2), texts_of(LENGTHS, 3)
    head = create_head("omit", DIM, variant=variant, reg=0.1, n_iter=3000, method=method).double()

    def pot(cost, a, b, reg):
        plan = ot.sinkhorn(a.numpy(), b.numpy(), cost.numpy(), reg, numItermax=20000, stopThr=1e-13)
        return torch.from_numpy(plan)

    def alone(cost, a, b, reg):
        return sinkhorn(cost[None], a[None], b[None], reg, tol=1e-13, n_iter=20000).plan[0]

    got = head(img, txt)
    assert torch.allclose(got, loop_similarities(head, img, txt, pot), atol=1e-7)
    assert torch.allclose(got, loop_similarities(head, img, txt, alone), atol=1e-7)


@pytest.mark.parametrize("kind", MARGINALS)
def test_marginals_follow_eq7_and_padding_has_no_mass(kind):
    img, txt = images_of(2, 5, 4, normalized=False), texts_of(LENGTHS, 5, normalized=False)
    a, b = fragment_marginals(img, txt, kind, tau=0.5)
    assert a.shape == (2, 5, 5) and b.shape == (2, 5, txt.local.shape[1])
    for i in range(2):
        for j, n_words in enumerate(LENGTHS):
            ha, hb = hand_marginals(kind, img, i, txt, j, tau=0.5)
            assert torch.allclose(a[i, j], ha, rtol=1e-12)
            assert torch.allclose(b[i, j, :n_words], hb, rtol=1e-12)
            assert torch.all(b[i, j, n_words:] == 0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_padded_words_carry_no_mass(variant):
    """Garbage in the padding, or more padding, leaves every similarity unchanged."""
    torch.manual_seed(0)
    head = create_head("omit", DIM, variant=variant, marginals="inter").double()
    img, clean = images_of(2, 4, 6), texts_of(LENGTHS, 7)
    garbage = texts_of(LENGTHS, 7, pad=5.0)
    wider = Fragments(
        torch.nn.functional.pad(clean.local, (0, 0, 0, 3), value=-2.0),
        torch.nn.functional.pad(clean.mask, (0, 3)),
        clean.pooled,
    )
    reference = head(img, clean)
    assert torch.allclose(head(img, garbage), reference, rtol=1e-12)
    assert torch.allclose(head(img, wider), reference, rtol=1e-12)


@settings(max_examples=12, deadline=None)
@given(
    variant=st.sampled_from(VARIANTS),
    marginals=st.sampled_from(MARGINALS),
    seed=st.integers(0, 10_000),
    lengths=st.lists(st.integers(1, 6), min_size=2, max_size=5),
)
def test_permutation_equivariance(variant, marginals, seed, lengths):
    """Permuting images permutes rows; permuting captions permutes columns."""
    torch.manual_seed(seed)
    head = create_head("omit", DIM, variant=variant, marginals=marginals).double()
    img, txt = images_of(4, 3, seed), texts_of(lengths, seed + 1)
    sims = head(img, txt)
    pi, pt = torch.randperm(len(img)), torch.randperm(len(txt))
    assert torch.allclose(head(img[pi], txt[pt]), sims[pi][:, pt], rtol=1e-10, atol=1e-12)


def test_kernel_and_log_agree_at_large_cost_spread():
    """Opposite words give a row spread of 2/λ = 100 > 79: kernel entries down to e^-100 are
    float32 subnormals, still nonzero, and the kernel domain agrees with the log domain."""
    img = images_of(2, 4, 8, dtype=torch.float32)
    words = torch.cat([img.local[:1, :3], -img.local[:1, :3]], 1)  # same and opposite directions
    mask = torch.ones(1, 6, dtype=torch.bool)
    txt = Fragments(words, mask, l2_normalize(words.mean(1)))
    kernel = create_head("omit", DIM, n_iter=50, method="kernel")(img, txt)
    log = create_head("omit", DIM, n_iter=50, method="log")(img, txt)
    assert torch.isfinite(kernel).all()
    assert torch.allclose(kernel, log, atol=1e-5)
    assert create_head("omit", DIM).settings.method == "auto"


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_are_finite(variant):
    torch.manual_seed(0)
    head = create_head("omit", DIM, variant=variant, marginals="inter")
    img, txt = images_of(3, 5, 9, torch.float32), texts_of(LENGTHS, 10, torch.float32)
    v = img.local.clone().requires_grad_(True)
    t = txt.local.clone().requires_grad_(True)
    sims = head(Fragments(v, img.mask, img.pooled), Fragments(t, txt.mask, txt.pooled))
    (sims.diagonal().sum() - sims.logsumexp(1).sum()).backward()
    assert torch.isfinite(v.grad).all() and torch.isfinite(t.grad).all()
    assert v.grad.abs().sum() > 0 and t.grad[~txt.mask].abs().sum() == 0
    if variant == "prompt":
        assert torch.isfinite(head.dustbins.grad).all() and head.dustbins.grad.abs().sum() > 0


@pytest.mark.parametrize("name", ["omit", "cam"])
def test_chunked_all_pairs_equal_one_call(name):
    torch.manual_seed(0)
    head = create_head(name, DIM, num_regions=5).double()
    lengths = [int(x) for x in torch.randint(1, 9, (23,))]
    img, txt = images_of(7, 5, 11), texts_of(lengths, 12)
    full = head(img, txt).float()
    chunked = all_pair_similarities(head, img, txt, image_chunk=3, caption_chunk=4, max_block_bytes=1 << 14)
    assert torch.allclose(chunked, full, atol=1e-6)


# --- CAM ---------------------------------------------------------------------------------------


def cam_loop(img: Fragments, txt: Fragments, tau: float, partial: bool) -> Tensor:
    """Eq. 10–11 (and the dustbin reading of Partial CAM) one pair and one word at a time."""
    out = torch.zeros(len(img), len(txt), dtype=torch.float64)
    for i in range(len(img)):
        regions = [x / x.norm() for x in img.local[i, : int(img.lengths[i])]]
        keys = ([img.pooled[i] / img.pooled[i].norm()] if partial else []) + regions
        for j in range(len(txt)):
            words = [x / x.norm() for x in txt.local[j, : int(txt.lengths[j])]]
            total = 0.0
            for w in words:
                e = [math.exp(float(k @ w) / tau) for k in keys]
                eta = [x / sum(e) for x in e]
                context = sum(eta_k * k for eta_k, k in zip(eta, keys))
                real = sum(eta_k * k for eta_k, k in zip(eta[1:], keys[1:])) if partial else context
                total += float(real @ w) / float(context.norm())
            out[i, j] = total / len(words)
    return out


@pytest.mark.parametrize("partial", [False, True])
def test_cam_matches_brute_force_loop(partial):
    img, txt = images_of(3, 6, 13), texts_of(LENGTHS, 14, pad=3.0)
    head = create_head("cam", DIM, tau=0.1, partial=partial).double()
    assert torch.allclose(head(img, txt), cam_loop(img, txt, 0.1, partial), rtol=1e-10)


@pytest.mark.parametrize("partial", [False, True])
def test_cam_gradients_finite_and_equivariant(partial):
    head = create_head("cam", DIM, partial=partial)
    img, txt = images_of(3, 5, 15, torch.float32), texts_of(LENGTHS, 16, torch.float32)
    v = img.local.clone().requires_grad_(True)
    sims = head(Fragments(v, img.mask, img.pooled), txt)
    sims.sum().backward()
    assert torch.isfinite(v.grad).all()
    pi, pt = torch.tensor([2, 0, 1]), torch.tensor([4, 2, 3, 0, 1])
    assert torch.allclose(head(img[pi], txt[pt]), sims.detach()[pi][:, pt], atol=1e-6)


def test_unknown_options_are_rejected():
    from mispair.errors import ConfigError

    with pytest.raises((ValueError, ConfigError)):
        create_head("omit", DIM, variant="greedy")
    with pytest.raises((ValueError, ConfigError)):
        create_head("omit", DIM, marginals="zipf")
    assert np.isclose(create_head("omit", DIM).settings.reg, 0.02)


def test_encoders_keep_raw_norms_for_the_norm_marginals():
    """Eq. 7 "norm" weighs fragments by their norms before the encoders normalise them: the
    image encoder's ``fc`` output and the BiGRU's averaged directions, recomputed here by hand
    (one caption at a time, no packing)."""
    from mispair.nn.encoders import FragmentImageEncoder
    from mispair.nn.text.bigru import BiGRUTextEncoder

    torch.manual_seed(0)
    image_encoder, text_encoder = FragmentImageEncoder(6, DIM), BiGRUTextEncoder(20, 5, DIM)
    features = torch.randn(2, 4, 6)
    tokens = torch.tensor([[3, 5, 7, 0], [2, 9, 0, 0], [4, 4, 8, 1]])
    lengths = (tokens > 0).sum(1)
    with torch.no_grad():
        img, txt = image_encoder(features), text_encoder(tokens, lengths)
        a, b = fragment_marginals(img, txt, "norm")
        raw_img = image_encoder.fc(features).norm(dim=-1)
        for j, n_words in enumerate(lengths.tolist()):
            states, _ = text_encoder.rnn(text_encoder.embed(tokens[j : j + 1, :n_words]))
            raw = ((states[0, :, :DIM] + states[0, :, DIM:]) / 2).norm(dim=-1)
            torch.testing.assert_close(b[0, j, :n_words], raw / raw.sum())
            assert torch.all(b[:, j, n_words:] == 0)
    torch.testing.assert_close(a[:, 0], raw_img / raw_img.sum(1, keepdim=True))
    assert not torch.allclose(a[:, 0], torch.full_like(a[:, 0], 0.25))  # not uniform
    assert torch.allclose(img.local.norm(dim=-1), torch.ones(2, 4))  # local stays normalised
    sub = Fragments.cat([txt[:1], txt[1:]])
    torch.testing.assert_close(sub.norms, txt.norms)


@pytest.mark.parametrize("variant", ["naive", "partial", "full"])
def test_antipodal_fragments_keep_similarities_and_gradients_finite(variant):
    """Costs reaching 2 (a word opposite a region) put kernel entries near e^-100 at λ = 0.02, in
    the subnormal range the head's kernel choice relies on; backpropagating through the three
    unrolled iterations must still give finite values, with or without dustbins."""
    dim = 8
    for trial in range(20):
        gen = torch.Generator().manual_seed(trial)
        regions = torch.nn.functional.normalize(torch.randn(3, 5, dim, generator=gen), dim=-1)
        words = torch.nn.functional.normalize(torch.randn(3, 4, dim, generator=gen), dim=-1)
        words[:, 0] = -regions[trial % 3, trial % 5]  # exactly opposite one region: cost 2
        regions.requires_grad_(True)
        images = Fragments(
            regions,
            torch.ones(3, 5, dtype=torch.bool),
            torch.nn.functional.normalize(regions.mean(1), dim=-1),
        )
        texts = Fragments(
            words, torch.ones(3, 4, dtype=torch.bool), torch.nn.functional.normalize(words.mean(1), dim=-1)
        )
        sims = create_head("omit", dim, variant=variant, num_regions=5)(images, texts)
        sims.sum().backward()
        assert torch.isfinite(sims).all() and torch.isfinite(regions.grad).all()

"""soft_pair_loss: the soft-margin triplet, or InfoNCE weighted by each pair's margin fraction,
against loops over the pairs."""

import math

import pytest
import torch

from mispair.losses import soft_pair_loss


def loop_info_nce(sims, tau):
    """``[B]`` cross-modal InfoNCE of each pair, by explicit sums over the row and the column."""
    s = sims.tolist()
    n = len(s)
    out = []
    for i in range(n):
        row = math.log(sum(math.exp(s[i][j] / tau) for j in range(n)))
        col = math.log(sum(math.exp(s[j][i] / tau) for j in range(n)))
        out.append(row + col - 2 * s[i][i] / tau)
    return torch.tensor(out, dtype=torch.float64)


def loop_hardest_triplet(sims, margins):
    s, m = sims.tolist(), margins.tolist()
    n = len(s)
    out = []
    for i in range(n):
        i2t = max(max(0.0, m[i] - s[i][i] + s[i][j]) for j in range(n) if j != i)
        t2i = max(max(0.0, m[i] - s[i][i] + s[j][i]) for j in range(n) if j != i)
        out.append(i2t + t2i)
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("tau", [0.05, 0.2, 1.0])
def test_infonce_is_the_margin_fraction_times_the_pairs_infonce(tau):
    gen = torch.Generator().manual_seed(0)
    sims = torch.rand(6, 6, generator=gen, dtype=torch.float64) * 2 - 1
    margins = 0.2 * torch.rand(6, generator=gen, dtype=torch.float64)
    got = soft_pair_loss(sims, margins, loss="infonce", margin=0.2, tau=tau)
    want = margins / 0.2 * loop_info_nce(sims, tau)
    assert torch.allclose(got, want, rtol=1e-10)


def test_full_margins_give_the_plain_infonce_and_zero_margins_nothing():
    sims = torch.rand(5, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    plain = loop_info_nce(sims, 0.2)
    assert torch.allclose(soft_pair_loss(sims, 0.3, loss="infonce", margin=0.3), plain, rtol=1e-10)
    assert torch.allclose(soft_pair_loss(sims, torch.full((5,), 0.3), loss="infonce", margin=0.3), plain)
    assert (soft_pair_loss(sims, torch.zeros(5), loss="infonce") == 0).all()


def test_triplet_is_the_hardest_negative_soft_margin_triplet():
    gen = torch.Generator().manual_seed(2)
    sims = torch.rand(7, 7, generator=gen, dtype=torch.float64) * 2 - 1
    margins = 0.2 * torch.rand(7, generator=gen, dtype=torch.float64)
    assert torch.allclose(soft_pair_loss(sims, margins), loop_hardest_triplet(sims, margins), rtol=1e-10)

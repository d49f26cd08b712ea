"""The decoy calibration against references: the null quantile and the q-values against loops,
the best-bin bound against a brute-force computation, the share and the probabilities against a
simulation whose share is known, monotone probabilities (hypothesis)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import beta

from mispair.division.calibration import (
    LAMBDAS,
    Stratum,
    calibrate,
    increasing_density,
    local_fdr,
    null_quantiles,
    q_values,
    share_bound,
)


def _simulated(share: float, n: int, seed: int, gap: float = 3.0):
    rng = np.random.default_rng(seed)
    mismatched = rng.random(n) < share
    score = np.where(mismatched, rng.normal(0, 1, n), rng.normal(gap, 1, n))
    null = rng.normal(0, 1, 4 * n)
    return score, null, mismatched


def test_null_quantiles_match_a_loop():
    rng = np.random.default_rng(0)
    score, null = rng.normal(size=50), rng.normal(size=30)
    brute = [(sum(x <= s for x in null) + 1) / 31 for s in score]
    assert np.allclose(null_quantiles(score, null), brute)


def test_q_values_match_a_loop_over_cuts():
    rng = np.random.default_rng(1)
    u = np.sort(rng.random(40))
    probability = np.sort(rng.random(40))[::-1]
    probability[10:14] = probability[10]  # a tie of probabilities is dropped together
    q = q_values(probability, u)
    for k in range(40):
        cuts = [m for m in range(k + 1, 41) if m == 40 or probability[m] != probability[m - 1]]
        assert np.isclose(q[k], min(1 - probability[:m].mean() for m in cuts))


def test_the_best_bin_bound_matches_a_brute_force_computation():
    rng = np.random.default_rng(2)
    u = rng.random(300) ** 0.5
    brute = min(
        beta.ppf(1 - 0.05 / len(LAMBDAS), sum(x <= lam for x in u) + 1, 300 - sum(x <= lam for x in u)) / lam
        for lam in LAMBDAS
    )
    assert np.isclose(share_bound(u, 0.05), brute)


def test_the_grenander_density_is_the_slope_of_the_greatest_convex_minorant():
    rng = np.random.default_rng(3)
    u = rng.random(60) ** 0.7
    density = increasing_density(u)
    order = np.argsort(u)
    assert (np.diff(density[order]) >= -1e-12).all()
    x, y = np.concatenate([[0], u[order]]), np.arange(61) / 60
    minorant = np.concatenate([[0], np.cumsum(density[order] * np.diff(x))])
    assert (minorant <= y + 1e-9).all()  # below the empirical CDF everywhere
    touching = np.isclose(minorant, y)  # and on it at the hull's vertices, the last included
    assert touching[-1] and touching.sum() >= 2


def test_the_share_and_its_interval_find_a_known_share():
    for share in (0.0, 0.2, 0.5):
        score, null, mismatched = _simulated(share, 4000, seed=int(share * 10))
        found = calibrate([Stratum(score, null)])
        assert abs(found.share - mismatched.mean()) < 0.03
        assert found.share_low <= mismatched.mean() <= found.share_high
        assert found.share_bound == min(share_bound(found.null_quantile, 0.05), 1.0) >= mismatched.mean()


def test_the_probabilities_are_calibrated_and_the_fdr_holds_on_a_simulation():
    score, null, mismatched = _simulated(0.3, 6000, seed=5)
    found = calibrate([Stratum(score[:4000], null[:16000]), Stratum(score[4000:], null[16000:])])
    p = found.mismatch_probability
    bins = np.clip((p * 10).astype(int), 0, 9)
    ece = sum(abs(p[bins == b].mean() - mismatched[bins == b].mean()) * (bins == b).sum() for b in set(bins))
    assert ece / len(p) < 0.05
    suspected = found.suspected(0.1)
    realized = 1 - mismatched[suspected].mean()
    assert suspected.sum() > 1000 and realized < 0.13
    assert abs(found.drop_errors(suspected)[0] - realized) < 0.05
    assert abs(found.separation_auc - 0.983) < 0.02  # Φ(3 / √2): the matched scores against the null


def test_a_clean_collection_has_no_suspects():
    score, null, _ = _simulated(0.0, 2000, seed=7)
    found = calibrate([Stratum(score, null)])
    assert found.share_low == 0 and not found.suspected(0.1).any() and (found.q_value == 1).all()
    assert found.threshold(0.1) == 1.0


def test_a_clean_collection_with_hard_pairs_suspects_none_though_its_point_share_is_above_zero():
    # 300 correct pairs, 10% of them hard (scored like the decoys' upper half): the point
    # estimate counts some of them, but its interval reaches 0, so no pair is suspected
    suspected, shares = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        hard = rng.random(300) < 0.1
        score = np.where(hard, rng.normal(0.8, 1, 300), rng.normal(3, 1, 300))
        found = calibrate([Stratum(score, rng.normal(0, 1, 1200))], resamples=100)
        shares.append(found.share)
        suspected.append(found.suspected(0.1).sum())
        assert found.share_low > 0 or (found.q_value == 1).all()
    assert np.mean(shares) > 0.01  # the point estimate errs high here...
    assert np.mean(suspected) <= 3  # ...but suspects stay at most 1% of the pairs on average


def test_a_dirty_collection_keeps_its_q_values():
    score, null, mismatched = _simulated(0.2, 2000, seed=8)
    found = calibrate([Stratum(score, null)])
    assert found.share_low > 0 and found.suspected(0.1).sum() > 0.8 * mismatched.sum()


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.0, 1.0), st.integers(5, 200))
def test_probabilities_never_rise_with_the_score(seed, share, n):
    rng = np.random.default_rng(seed)
    u = rng.random(n)
    p = local_fdr(u, share)
    order = np.argsort(u)
    assert ((p >= 0) & (p <= 1)).all() and (np.diff(p[order]) <= 1e-12).all()


def test_pairs_of_equal_null_quantile_share_one_probability():
    # pairs above every decoy all read u = 1: the first of them must not be set apart
    rng = np.random.default_rng(0)
    score = np.r_[rng.normal(0, 1, 100), np.full(50, 10.0)]
    found = calibrate([Stratum(score, rng.normal(0, 1, 400))], resamples=20)
    top = found.mismatch_probability[100:]
    assert (found.null_quantile[100:] == 1).all() and np.all(top == top[0]) and top[0] == 0.0

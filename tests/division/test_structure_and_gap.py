"""GSC's structure consistency and MGCS's drift agreement (mispair.division.structure, .gap)
against brute-force loops over the pairs, with their invariants."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mispair.division.gap import drift_agreement, gap_corrected_similarity
from mispair.division.scores import mixture_clean_probability
from mispair.division.structure import structure_checked_probability, structure_consistency


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _structure_loop(images, texts, weight):
    n = len(images)
    out = np.zeros(n)
    for i in range(n):
        image_row = np.array([_cos(images[i], images[k]) * weight[k] for k in range(n)])
        text_row = np.array([_cos(texts[i], texts[k]) * weight[k] for k in range(n)])
        out[i] = _cos(image_row, text_row)
    return out


@pytest.mark.parametrize("chunk", [1, 3, 1024])
def test_structure_consistency_equals_the_loop(chunk):
    rng = np.random.default_rng(0)
    images, texts, weight = rng.normal(size=(9, 4)), rng.normal(size=(9, 4)), rng.uniform(size=9)
    got = structure_consistency(
        torch.from_numpy(images), torch.from_numpy(texts), torch.from_numpy(weight), chunk=chunk
    )
    np.testing.assert_allclose(got.numpy(), _structure_loop(images, texts, weight), atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_structure_consistency_is_permutation_equivariant(seed):
    rng = np.random.default_rng(seed)
    images, texts, weight = (
        torch.from_numpy(a) for a in (rng.normal(size=(7, 3)), rng.normal(size=(7, 3)), rng.uniform(size=7))
    )
    order = torch.from_numpy(rng.permutation(7))
    whole = structure_consistency(images, texts, weight)
    permuted = structure_consistency(images[order], texts[order], weight[order])
    assert torch.allclose(permuted, whole[order], atol=1e-5)


def test_a_pair_whose_halves_share_a_neighbourhood_is_consistent_and_a_swapped_one_is_not():
    # images and captions in matching clusters; pairs 0 and 1 have their captions swapped across clusters
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 16)) * 3
    cluster = np.repeat(np.arange(4), 10)
    images = centres[cluster] + rng.normal(size=(40, 16)) * 0.3
    texts = centres[cluster] @ rng.normal(size=(16, 16)) + rng.normal(size=(40, 16)) * 0.3
    texts[[0, 10]] = texts[[10, 0]]  # pair 0 (cluster 0) now has a cluster-1 caption, and back
    score = structure_consistency(torch.from_numpy(images), torch.from_numpy(texts), torch.ones(40))
    matched = np.setdiff1d(np.arange(40), [0, 10])
    assert score[[0, 10]].max() < score[matched].min()


def test_the_checked_probability_is_the_lower_of_the_two_mixtures():
    rng = np.random.default_rng(1)
    images, texts = torch.from_numpy(rng.normal(size=(60, 5))), torch.from_numpy(rng.normal(size=(60, 5)))
    pair_score = np.r_[rng.normal(1, 0.1, 30), rng.normal(0, 0.1, 30)]
    checked = structure_checked_probability(images, texts, pair_score)
    cross = mixture_clean_probability(pair_score)
    structure = structure_consistency(images, texts, torch.from_numpy(cross)).numpy()
    np.testing.assert_allclose(checked, np.minimum(cross, mixture_clean_probability(structure)))
    assert (checked <= cross + 1e-12).all()


def test_the_mixture_probability_is_high_for_the_high_scores():
    score = np.r_[np.linspace(0.8, 1.0, 20), np.linspace(0.0, 0.2, 20)]
    assert (mixture_clean_probability(score)[:20] > 0.9).all()
    assert (mixture_clean_probability(score)[20:] < 0.1).all()


def _drift_loop(images, texts, n):
    offsets = images - texts
    out = np.zeros(len(images))
    for i in range(len(images)):
        sims = [(_cos(images[i], images[v]), v) for v in range(len(images)) if v != i]
        nearest = [v for _, v in sorted(sims, key=lambda x: -x[0])[:n]]
        out[i] = _cos(offsets[i], offsets[nearest].mean(axis=0))
    return out


@pytest.mark.parametrize("n", [1, 3, 5])
def test_drift_agreement_equals_the_loop(n):
    rng = np.random.default_rng(n)
    images, texts = rng.normal(size=(12, 4)), rng.normal(size=(12, 4))
    got = drift_agreement(torch.from_numpy(images), torch.from_numpy(texts), n)
    np.testing.assert_allclose(got.numpy(), _drift_loop(images, texts, n), atol=1e-6)
    own = np.array([_cos(a, b) for a, b in zip(images, texts)])
    np.testing.assert_allclose(
        gap_corrected_similarity(torch.from_numpy(images), torch.from_numpy(texts), n).numpy(),
        own * _drift_loop(images, texts, n),
        atol=1e-6,
    )


def test_a_constant_gap_agrees_everywhere():
    # every caption is its image moved by the same vector: every offset agrees with every other
    rng = np.random.default_rng(0)
    images = torch.from_numpy(rng.normal(size=(10, 6)))
    gap = torch.from_numpy(rng.normal(size=6))
    assert torch.allclose(drift_agreement(images, images - gap), torch.ones(10, dtype=torch.float64))

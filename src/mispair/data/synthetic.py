"""A synthetic image–caption collection with real structure, for tests and as an offline fallback.

Every image shows a few latent *concepts*; each concept has a prototype vector that the image's
regions render (with noise and distractor regions), and two or three synonymous words that its
captions use (in random order, among filler words). Matching therefore requires learning both the
visual prototypes and the vocabulary, as with real data, while staying small and fast.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mispair.data.pairset import PairSet
from mispair.data.precomp import write_precomp

_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "be", "du", "fa", "go", "hi", "ju"]
_FILLERS = ["a", "the", "with", "and", "near", "of", "some", "two"]


def _concept_words(n_concepts: int, synonyms: int, rng: np.random.Generator) -> list[list[str]]:
    words: set[str] = set()
    while len(words) < n_concepts * synonyms:
        words.add("".join(rng.choice(_SYLLABLES, size=3)))
    ordered = sorted(words)
    rng.shuffle(ordered)
    return [ordered[c * synonyms : (c + 1) * synonyms] for c in range(n_concepts)]


def make_synthetic(
    n_images: int = 1000,
    captions_per_image: int = 5,
    *,
    n_concepts: int = 40,
    concepts_per_image: int = 3,
    n_fragments: int = 12,
    feature_dim: int = 64,
    feature_noise: float = 0.6,
    seed: int = 0,
    world_seed: int = 1234,
) -> PairSet:
    """Generate ``n_images`` images with ``captions_per_image`` captions each.

    ``world_seed`` fixes the concepts (prototypes and words), shared across splits; ``seed`` draws
    the images and captions of this split.

    Returns:
        A ``PairSet`` with ``images [n_images, n_fragments, feature_dim]`` float32 and captions in
        the standard layout (caption ``k`` of image ``k // captions_per_image``).

    Example:
        >>> pairs = make_synthetic(10, 5, seed=0)
        >>> pairs.images.shape, pairs.n_captions, pairs.captions_per_image
        ((10, 12, 64), 50, 5)
    """
    world = np.random.default_rng(world_seed)
    prototypes = world.normal(size=(n_concepts, feature_dim)).astype(np.float32)
    words = _concept_words(n_concepts, 2, world)
    rng = np.random.default_rng(seed)
    concepts = np.stack(
        [rng.choice(n_concepts, size=concepts_per_image, replace=False) for _ in range(n_images)]
    )
    images = _render_images(concepts, prototypes, n_fragments, feature_noise, rng)
    captions = [_caption(concepts[i], words, rng) for i in range(n_images) for _ in range(captions_per_image)]
    return PairSet(
        images=images,
        captions=captions,
        image_of_caption=np.arange(n_images * captions_per_image) // captions_per_image,
        name=f"synthetic/seed{seed}",
        image_ids=[f"syn{seed}_{i}" for i in range(n_images)],
        image_meta={"concepts": [" ".join(map(str, c)) for c in concepts.tolist()]},
    )


def _render_images(
    concepts: np.ndarray,
    prototypes: np.ndarray,
    n_fragments: int,
    noise: float,
    rng: np.random.Generator,
) -> np.ndarray:
    n_images, per_image = concepts.shape
    dim = prototypes.shape[1]
    images = rng.normal(scale=noise, size=(n_images, n_fragments, dim)).astype(np.float32)
    n_object_regions = max(per_image, (3 * n_fragments) // 4)
    for i in range(n_images):
        shown = concepts[i][np.arange(n_object_regions) % per_image]
        strength = rng.uniform(0.6, 1.4, size=(n_object_regions, 1)).astype(np.float32)
        images[i, :n_object_regions] += strength * prototypes[shown]
        images[i] = images[i][rng.permutation(n_fragments)]
    return images


def _caption(concepts: np.ndarray, words: list[list[str]], rng: np.random.Generator) -> str:
    tokens = [str(rng.choice(words[c])) for c in concepts]
    tokens += [str(w) for w in rng.choice(_FILLERS, size=rng.integers(1, 4))]
    rng.shuffle(tokens)
    return " ".join(tokens)


def write_synthetic_dataset(
    root: str | Path, n_train: int = 1000, n_dev: int = 100, n_test: int = 200, **options
) -> Path:
    """Write train/dev/test splits of :func:`make_synthetic` in the precomputed format."""
    root = Path(root)
    for seed, (split, n) in enumerate((("train", n_train), ("dev", n_dev), ("test", n_test))):
        write_precomp(make_synthetic(n, seed=seed, **options), root, split)
    return root

"""Duplicates and leaks against brute-force loops over every pair of images and captions: chunked
or not, the same near-duplicates, caption counts and leaks."""

import numpy as np
import pytest

from mispair.audit.duplicates import find_duplicates, normalized, pooled
from mispair.audit.words import why


def collection(seed: int):
    """Fragment features with planted near-copies, captions with repeats, splits."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(40, 4, 8)).astype(np.float32)
    copies = rng.choice(40, size=(10, 2), replace=False)
    features[copies[:, 1]] = features[copies[:, 0]] + 1e-3 * rng.normal(size=(10, 4, 8))
    image_of_caption = np.sort(rng.integers(0, 40, 90))
    words = ["a dog", "A  dog", "a cat", "red apple", "a tree"]
    captions = [
        words[j] if rng.random() < 0.5 else f"caption {k}" for k, j in enumerate(rng.integers(0, 5, 90))
    ]
    for k in range(90):  # a copied image's caption, repeated on its copy
        if image_of_caption[k] in copies[:, 0] and rng.random() < 0.5:
            twin = copies[copies[:, 0] == image_of_caption[k], 1][0]
            captions.append(captions[k])
            image_of_caption = np.append(image_of_caption, twin)
    split = np.where(image_of_caption % 3 == 0, "test", "train")
    return features, captions, image_of_caption, split


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("chunk", [1, 7, 512])
def test_duplicates_are_the_brute_force_ones(seed, chunk):
    features, captions, image_of_caption, split = collection(seed)
    threshold = 0.99
    found = find_duplicates(features, captions, image_of_caption, split, threshold=threshold, chunk=chunk)
    mean = features.mean(axis=1)
    cosine = lambda i, j: mean[i] @ mean[j] / np.linalg.norm(mean[i]) / np.linalg.norm(mean[j])  # noqa: E731
    first = [next((j for j in range(40) if j != i and cosine(i, j) >= threshold), -1) for i in range(40)]
    assert found.duplicate_of.tolist() == first
    assert (found.duplicate_of >= 0).sum() >= 10  # the planted copies are found
    text = [" ".join(c.lower().split()) for c in captions]
    same = [
        len({image_of_caption[j] for j in range(len(text)) if text[j] == text[k]} - {image_of_caption[k]})
        for k in range(len(text))
    ]
    assert found.same_caption_images.tolist() == same
    leak = [
        split[k] != "train"
        and any(
            split[j] == "train"
            and text[j] == text[k]
            and cosine(image_of_caption[j], image_of_caption[k]) >= threshold
            for j in range(len(text))
        )
        for k in range(len(text))
    ]
    assert found.leak.tolist() == leak and any(leak)  # some copied pairs leak into the test split
    summary = found.summary(image_of_caption)
    assert summary["leaks"] == sum(leak) and summary["images_with_near_duplicate"] == sum(
        f >= 0 for f in first
    )


def test_pooling_gives_unit_vectors_of_the_fragment_mean():
    features = np.random.default_rng(0).normal(size=(5, 3, 4))
    vectors = pooled(features, chunk=2)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, rtol=1e-6)
    mean = features.mean(axis=1)
    np.testing.assert_allclose(vectors, mean / np.linalg.norm(mean, axis=1, keepdims=True), rtol=1e-5)
    assert normalized("  A   Red\tapple ") == "a red apple"


def test_why_names_the_duplicates():
    words = why(0, None, False, duplicate_of="b.png", same_caption=1, leak=True)
    assert words.endswith(
        "its image nearly duplicates b.png; 1 other image carries the same caption; "
        "it repeats a training pair (a leak)"
    )

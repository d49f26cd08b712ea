"""How many held-out pairs share their caption text or their picture with their scorer's training
pairs: folds dealt by image index (before issue 36) against folds dealt by content.

For each dataset, noise rate and seed, the training split is paired as the run trains it (``pmp``
noise), the images are dealt into 5 folds by each scheme (3 partitions, the division's seeds), and
a held-out pair counts as leaking when a training pair of its scorer (every pair of the other
folds) has the identical caption text (case folded, white space collapsed) or a picture whose
pooled features have cosine ≥ 0.99 with its own::

    python benchmarks/fold_leaks.py --datasets tuxpaint openclipart --noise 0.4 0.7 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np

from mispair.config import load_config
from mispair.data.batching import encode_captions
from mispair.data.content import (
    NEAR_DUPLICATE_COSINE,
    content_folds,
    fold_groups,
    near_duplicate_edges,
    pooled,
)
from mispair.engine.assembly import load_run_data
from mispair.seeds import child_seed

FOLDS, REPEATS = 5, 3


def index_folds(image_of_caption: np.ndarray, n_images: int, seed: int) -> np.ndarray:
    """The previous scheme: the images dealt by a seeded permutation of their row numbers."""
    of_image = np.empty(n_images, dtype=np.int64)
    of_image[np.random.default_rng(seed).permutation(n_images)] = np.arange(n_images) % FOLDS
    return of_image[image_of_caption]


def leaking(fold: np.ndarray, texts: list[str], image_of_caption: np.ndarray, near: tuple) -> np.ndarray:
    """``[n_pairs]`` True where a pair of another fold has the same text or a near-duplicate picture."""
    folds_of_text: dict[str, Counter] = {}
    for text, f in zip(texts, fold):
        folds_of_text.setdefault(text, Counter())[f] += 1
    by_text = np.array(
        [sum(c.values()) > c[f] for text, f in zip(texts, fold) for c in [folds_of_text[text]]]
    )
    fold_of_image = {int(i): int(f) for i, f in zip(image_of_caption, fold)}
    crossing = {
        int(x)
        for i, j in zip(*near)
        if fold_of_image.get(int(i), -1) != fold_of_image.get(int(j), -2)
        for x in (i, j)
    }
    return by_text | np.isin(image_of_caption, list(crossing))


def measure(dataset: str, noise: float, seed: int) -> dict[str, float]:
    config = load_config(
        Path("configs/holdout") / f"{dataset}.yaml",
        [f"data.noise.rate={noise}", f"train.seed={seed}", f"data.noise.seed={seed}"],
    )
    data = load_run_data(config)
    paired = data.noise.image_of_caption if data.noise is not None else data.train.image_of_caption
    texts = [" ".join(c.casefold().split()) for c in data.train.captions]
    near = near_duplicate_edges(pooled(data.train.images), NEAR_DUPLICATE_COSINE)
    tokens = encode_captions(data.train, data.tokenizer)
    groups = fold_groups(data.train.images, tokens, paired, FOLDS)
    out = {}
    for scheme in ("index", "content"):
        shares = []
        for r in range(REPEATS):
            repeat_seed = child_seed(seed, "repeat", r)
            fold = (
                index_folds(paired, data.train.n_images, repeat_seed)
                if scheme == "index"
                else content_folds(groups, paired, FOLDS, repeat_seed)
            )
            shares.append(leaking(fold, texts, paired, near).mean())
            sizes = np.bincount(fold, minlength=FOLDS)
            out[f"{scheme} spread"] = max(out.get(f"{scheme} spread", 0.0), sizes.max() / sizes.min())
        out[scheme] = float(np.mean(shares))
    out["joined_by"] = groups.joined_by
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="+", default=["tuxpaint"])
    parser.add_argument("--noise", nargs="+", type=float, default=[0.4, 0.7])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    args = parser.parse_args()
    print(
        "| dataset | noise | seed | held-out pairs sharing text or picture: folds by index | by content "
        "| largest / smallest fold (pairs): by index | by content | content joined by |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for dataset in args.datasets:
        for noise in args.noise:
            for seed in args.seeds:
                share = measure(dataset, noise, seed)
                print(
                    f"| {dataset} | {noise:g} | {seed} | {share['index']:.1%} | {share['content']:.1%} | "
                    f"{share['index spread']:.2f} | {share['content spread']:.2f} | {share['joined_by']} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()

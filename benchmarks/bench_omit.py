"""Evaluation time of the OMIT head against VSE (cosine), CAM and SGR (OMIT Table 3's "time").

Every head scores the same random inputs (embed 1024, 36 regions, caption lengths 6–20) through
:func:`mispair.nn.allpairs.all_pair_similarities`, the engine evaluation uses, with untrained
weights (speed does not depend on training). The paper's size is 1K images × 5K captions; the
default here is a scaled size, printed as such: the work of every head is linear in the number
of pairs, so the ratios carry over. ``--images 1000 --captions 5000`` runs the full size.

Run: ``PYTHONPATH=src python benchmarks/bench_omit.py [--images N] [--captions M] [--threads T]``.
"""

from __future__ import annotations

import argparse
import time

import torch

from mispair.nn.allpairs import all_pair_similarities
from mispair.nn.embedding import Fragments, l2_normalize, masked_mean
from mispair.nn.heads import create_head, list_heads

EMBED, REGIONS = 1024, 36
HEADS = [
    ("vse (cosine)", "cosine", {}),
    ("omit partial", "omit", {"num_regions": REGIONS}),
    ("omit naive", "omit", {"variant": "naive", "num_regions": REGIONS}),
    ("cam", "cam", {"num_regions": REGIONS}),
    ("cam partial", "cam", {"partial": True, "num_regions": REGIONS}),
    ("sgr", "sgr", {"num_regions": REGIONS}),
]


def inputs(n_images: int, n_captions: int, seed: int = 0) -> tuple[Fragments, Fragments]:
    """Unit fragments as the encoders give them; pooled = normalised mean of the real ones."""
    gen = torch.Generator().manual_seed(seed)
    regions = l2_normalize(torch.randn(n_images, REGIONS, EMBED, generator=gen))
    image_mask = torch.ones(n_images, REGIONS, dtype=torch.bool)
    lengths = torch.randint(6, 21, (n_captions,), generator=gen)
    words = l2_normalize(torch.randn(n_captions, int(lengths.max()), EMBED, generator=gen))
    mask = torch.arange(words.shape[1])[None] < lengths[:, None]
    images = Fragments(regions, image_mask, l2_normalize(masked_mean(regions, image_mask)))
    return images, Fragments(words, mask, l2_normalize(masked_mean(words, mask)))


def timed(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - began)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--captions", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    n_pairs = args.images * args.captions
    scale = "" if n_pairs == 1000 * 5000 else f" (scaled: {n_pairs / 5e6:.2%} of 1K×5K's pairs)"
    threads = torch.get_num_threads()
    print(
        f"{args.images} images × {args.captions} captions{scale}, embed {EMBED}, "
        f"{REGIONS} regions, {threads} threads, best of {args.repeats}"
    )
    images, texts = inputs(args.images, args.captions)
    available = set(list_heads())
    rows = []
    for label, name, options in HEADS:
        if name not in available:
            print(f"{label:>14}: head {name!r} not registered, skipped")
            continue
        torch.manual_seed(0)
        head = create_head(name, EMBED, **options).eval()
        with torch.no_grad():
            seconds = timed(lambda h=head: all_pair_similarities(h, images, texts), args.repeats)
        rows.append((label, seconds))
    base = dict(rows).get("vse (cosine)")
    omit = dict(rows).get("omit partial")
    print(f"{'head':>14} {'seconds':>9} {'per 1K×5K s':>12} {'× vse':>8} {'× omit':>8}")
    for label, seconds in rows:
        full = seconds * 5e6 / n_pairs
        vs_base = f"{seconds / base:8.1f}" if base else f"{'-':>8}"
        vs_omit = f"{seconds / omit:8.2f}" if omit else f"{'-':>8}"
        print(f"{label:>14} {seconds:9.3f} {full:12.1f} {vs_base} {vs_omit}", flush=True)


if __name__ == "__main__":
    main()

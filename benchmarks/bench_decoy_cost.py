"""What the decoys add to an audit of ``--pairs`` pairs, part by part, beside the parts they ride on.

An audit's held-out scoring at 100,000 pairs: 3 rounds × 15 scorers, each scoring its fold (20,000
pairs) in contrast groups of :data:`~mispair.engine.pair_scores.CONTRAST_IMAGES` images. The
decoys add (1) drawing them (once per round), (2) one more log-sum-exp over each contrast block and
one gathered entry per decoy (each scorer), (3) the calibration (once per audit). Timed here on
random embeddings of the audit's size, side by side in one run: each part with and without the
decoys, ``--repeats`` times (medians), and the total extra per audit against the audit's own time
(``--audit-seconds``: the 100K default schedule's wall time, docs/scale.md).

    OMP_NUM_THREADS=2 python benchmarks/bench_decoy_cost.py --pairs 100000 --audit-seconds 648
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from mispair.division.calibration import Stratum, calibrate
from mispair.engine.held_out.contrast import contrast_with_decoys
from mispair.engine.held_out.decoys import DECOYS_PER_PAIR, cells_of, decoy_pairs
from mispair.engine.held_out.sampling import CONTRAST_IMAGES


def contrast_before(rows, n_images: int, image_of_caption: torch.Tensor, tau: float, chunk: int):
    """The contrast score as it was computed before the decoys (1bef6c0): a column log-sum-exp
    over every image and a row one over the other images' captions, per chunk."""
    n_captions = len(image_of_caption)
    column_lse = torch.full((n_captions,), float("-inf"))
    positive, others = torch.zeros(n_captions), torch.zeros(n_captions)
    for start in range(0, n_images, chunk):
        logits = rows(start, min(start + chunk, n_images)) / tau
        image = torch.arange(start, start + logits.shape[0])
        column_lse = torch.logaddexp(column_lse, torch.logsumexp(logits, dim=0))
        same_image = image_of_caption[None, :] == image[:, None]
        other_lse = torch.logsumexp(logits.masked_fill(same_image, float("-inf")), dim=1)
        mine = torch.nonzero((image_of_caption >= start) & (image_of_caption <= image[-1])).squeeze(1)
        local = image_of_caption[mine] - start
        positive[mine], others[mine] = logits[local, mine], other_lse[local]
    return (positive - column_lse + positive - torch.logaddexp(others, positive)) / 2


def timed(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--audit-seconds", type=float, default=648.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dim", type=int, default=256)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n, folds, repeats_, rounds = args.pairs, 5, 3, 3
    scorers = folds * repeats_
    fold_pairs = n // folds
    groups_per_fold = max(1, -(-fold_pairs // CONTRAST_IMAGES))
    assignments = np.stack([rng.integers(0, folds * groups_per_fold, size=n) for _ in range(repeats_)])
    group = rng.integers(0, n, size=n)

    def draw() -> np.ndarray:
        return decoy_pairs(cells_of(assignments), group, DECOYS_PER_PAIR, 0)

    decoys = draw()
    draw_s = timed(draw, args.repeats)

    block = min(CONTRAST_IMAGES, fold_pairs)
    image = torch.nn.functional.normalize(torch.randn(block, args.dim), dim=1)
    text = torch.nn.functional.normalize(torch.randn(block, args.dim), dim=1)
    paired = torch.arange(block)
    per_block = len(decoys) * block // n // repeats_ * 1  # a block's share of one repeat's decoys
    block_decoys = torch.stack(
        [torch.randint(0, block, (per_block,)), torch.randint(0, block, (per_block,))], 1
    )

    def rows(start: int, stop: int) -> torch.Tensor:
        return image[start:stop] @ text.T

    plain_s = timed(lambda: contrast_before(rows, block, paired, 0.05, 256), args.repeats)
    with_s = timed(
        lambda: contrast_with_decoys(rows, block, paired, 0.05, chunk=256, decoys=block_decoys), args.repeats
    )
    blocks_per_audit = rounds * scorers * groups_per_fold
    score = rng.normal(2, 1, n)
    null = rng.normal(0, 1, len(decoys) // repeats_)
    calibrate_s = timed(lambda: calibrate([Stratum(score, null)]), args.repeats)
    extra = rounds * draw_s + blocks_per_audit * (with_s - plain_s) + calibrate_s
    print(f"pairs {n:,}; decoys {len(decoys):,} ({DECOYS_PER_PAIR} per caption at most)")
    print(f"draw the decoys: {draw_s:.2f} s (× {rounds} rounds)")
    print(
        f"one contrast block of {block} images: {plain_s * 1000:.0f} ms before the decoys, "
        f"{with_s * 1000:.0f} ms with {per_block:,} (× {blocks_per_audit} blocks per audit)"
    )
    print(f"calibration: {calibrate_s:.2f} s (once)")
    print(
        f"extra per audit: {extra:.1f} s = {100 * extra / args.audit_seconds:.1f}% of a "
        f"{args.audit_seconds:.0f} s audit"
    )


if __name__ == "__main__":
    main()

"""VSE baseline throughput: training pairs/s and evaluation time at a few sizes.

Run: ``python benchmarks/bench_vse.py [--quick]``. Prints one table; numbers are medians of
``--repeats`` runs on this machine, for comparing later changes side by side.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mispair.config import ModelConfig
from mispair.data.batching import TrainingPairs, encode_captions
from mispair.data.synthetic import make_synthetic
from mispair.data.vocab import Vocabulary
from mispair.engine.evaluation import evaluate_split
from mispair.losses import triplet_loss
from mispair.nn.assembly import build_model


def train_pairs_per_second(pairs, tokens, model_cfg, batch_size: int, steps: int) -> float:
    model = build_model(model_cfg, pairs.feature_dim, 1 + max(max(t) for t in tokens))
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
    data = TrainingPairs(pairs, tokens)
    batches = list(data.batches(batch_size, seed=0, drop_last=True))[:steps]
    began = time.perf_counter()
    for batch in batches:
        loss = triplet_loss(model(batch.images, batch.tokens, batch.lengths), 0.2, negatives="hardest")
        optimizer.zero_grad()
        loss.mean().backward()
        optimizer.step()
    return len(batches) * batch_size / (time.perf_counter() - began)


def eval_seconds(pairs, tokens, model_cfg) -> float:
    model = build_model(model_cfg, pairs.feature_dim, 1 + max(max(t) for t in tokens))
    began = time.perf_counter()
    evaluate_split([model], pairs, tokens)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    sizes = [(36, 256), (36, 1024)] if args.quick else [(36, 256), (36, 1024), (49, 1280)]
    n_images = 200 if args.quick else 1000
    torch.manual_seed(0)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
        f"{n_images} images × 5 captions; median of {repeats}"
    )
    eval_label = f"eval s ({n_images}×{5 * n_images})"
    print(f"{'fragments×dim':>14} {'embed':>6} {'train pairs/s':>14} {eval_label:>17}")
    for fragments, dim in sizes:
        pairs = make_synthetic(n_images, 5, n_fragments=fragments, feature_dim=dim, seed=0)
        vocab = Vocabulary.build(pairs.captions, 1)
        tokens = encode_captions(pairs, vocab)
        for embed in (256, 1024):
            cfg = ModelConfig(embed_dim=embed)
            train = [train_pairs_per_second(pairs, tokens, cfg, 128, 10) for _ in range(repeats)]
            evals = [eval_seconds(pairs, tokens, cfg) for _ in range(repeats)]
            print(
                f"{f'{fragments}×{dim}':>14} {embed:>6} {statistics.median(train):14.0f} "
                f"{statistics.median(evals):17.2f}"
            )


if __name__ == "__main__":
    main()

"""A ``holdout`` training step of the audit's two linear-backbone models: taken together (the
similarities of both models in one stack, the caption vectors read once:
:mod:`mispair.nn.linear_backbone`) against model by model, side by side in one run.

The step is the trainer's: the recipe's terms, their backward, the gradient clipped, Adam (fused
where the release has it) and the logged values read. The models are the audit's (``cosine``
head, ``embed_dim`` 256, MiniLM caption vectors, the mean image feature); the captions' frozen
vectors are random (the cache is filled beforehand, as an audit's is), so MiniLM is not loaded
for them. Rounds alternate the two paths and the medians are printed, so a busy machine slows
both alike.

    python benchmarks/bench_holdout_step.py --threads 2 --write benchmarks/results/bench_holdout_step.md
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from mispair.config import ModelConfig
from mispair.data.batching import TrainingPairs
from mispair.data.synthetic import make_synthetic
from mispair.methods.base import RecipeContext, build_options, get_recipe
from mispair.nn.assembly import build_model
from mispair.nn.text.minilm import _frozen_cache


def holdout_recipe(args: argparse.Namespace):
    """The audit's holdout recipe over two fresh linear-backbone models on a synthetic collection."""
    pairs = make_synthetic(args.images, 5, seed=0, feature_dim=args.feature_dim, n_fragments=3)
    rng = np.random.default_rng(0)
    tokens = [
        [101, *rng.integers(1000, 30000, size=rng.integers(5, 20)).tolist(), 102]
        for _ in range(pairs.n_captions)
    ]
    _frozen_cache(False, "float32").fill(tokens, lambda t, _: torch.randn(len(t), 1, 384))
    train = TrainingPairs(pairs, tokens, pairs.image_of_caption)
    config = ModelConfig(
        head="cosine",
        text_encoder="minilm",
        image_pooling="features",
        embed_dim=256,
        text_precision="float32",
    )
    torch.manual_seed(0)
    models = [build_model(config, pairs.feature_dim, 100) for _ in range(2)]
    context = RecipeContext(train, args.batch_size, 4, torch.device("cpu"), 0, noise=None)
    context.pair_scores = rng.normal(size=len(train))
    cls = get_recipe("holdout")
    return cls(models, build_options(cls, {"tau": 0.2, "suspect_weight": 0.1}), context)


def step_milliseconds(recipe, optimizer, batches, together: bool) -> float:
    """Mean milliseconds of one trainer step over ``batches``, the models together or not."""
    recipe.__dict__["together"] = together
    params = [p for group in optimizer.param_groups for p in group["params"]]
    started = time.perf_counter()
    for batch in batches:
        optimizer.zero_grad(set_to_none=True)
        terms = recipe.train_step(batch, 0).terms
        sum(terms.values()).backward()
        torch.nn.utils.clip_grad_norm_(params, 2.0)
        optimizer.step()
        {name: float(value.detach()) for name, value in terms.items()}
    return (time.perf_counter() - started) / len(batches) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--feature-dim", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--write", type=Path, help="append the table to this markdown file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    recipe = holdout_recipe(args)
    assert recipe.together, "the audit's models should run together"
    params = [p for m in recipe.models for p in m.parameters() if p.requires_grad]
    try:
        optimizer = torch.optim.Adam(params, lr=1e-3, fused=True)
    except RuntimeError:
        optimizer = torch.optim.Adam(params, lr=1e-3)
    rng = np.random.default_rng(1)
    n = len(recipe.context.train)
    batches = [
        recipe.context.train.batch(rng.choice(n, args.batch_size, replace=False)) for _ in range(args.steps)
    ]
    step_milliseconds(recipe, optimizer, batches[:20], True)  # warm-up of both paths
    step_milliseconds(recipe, optimizer, batches[:20], False)
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeats):
        for together in (False, True):
            times[together].append(step_milliseconds(recipe, optimizer, batches, together))
    alone, together = statistics.median(times[False]), statistics.median(times[True])
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    lines = [
        f"## holdout step, two linear-backbone models ({commit})",
        "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; batch {args.batch_size}, image features "
        f"{args.feature_dim}, embed 256, {args.threads} thread(s), {args.steps} steps × {args.repeats} "
        "rounds, alternating; `python benchmarks/bench_holdout_step.py`",
        "",
        "| path | ms/step, each round | median | ratio |",
        "|---|---|---:|---:|",
        f"| model by model | {_rounds(times[False])} | {alone:.2f} | 1.00 |",
        f"| together | {_rounds(times[True])} | {together:.2f} | {together / alone:.2f} |",
        "",
    ]
    print("\n".join(lines))
    if args.write:
        with open(args.write, "a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")


def _rounds(milliseconds: list[float]) -> str:
    return ", ".join(f"{t:.2f}" for t in milliseconds)


if __name__ == "__main__":
    main()

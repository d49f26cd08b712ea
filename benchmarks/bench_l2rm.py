"""Extra training time of L2RM over a VSE epoch, and how far its cost functions drift.

Part 1 trains ``vse`` and ``l2rm`` through the real pipeline (:func:`mispair.engine.run.train_run`)
on the same data, seed and batch size, and times, per post-warm-up epoch: the training pass
(the log's ``seconds/train``), and inside it L2RM's cost-function step (Eq. 6: the forward pass
that builds its loss; the trainer's backward and Adam step are in the training pass) and its
refined alignment (Eq. 7–9, the partial OT); the division (``seconds/division``: scoring every
pair and the beta mixture) apart. An L2RM epoch runs one step per batch of *matched* pairs, each with
a forward/backward pass over a matched and a mismatched batch. Default: the
synthetic data with the SGR head at batch 128 (the paper's size, scaled down in pairs and
dimensions so it runs on a CPU in a few minutes); ``--head cosine`` is faster.

Part 2 (``--drift N``) replays ``N`` cost-function steps of Eq. 6 (Adam, lr 2e-6, ``k ≤ 0.1 B``
kept pairs per step, similarities uniform in [0, 1]) for the reference's ``Linear(B, B)`` and the
default exchangeable layer, and prints how far each moved from ``relu(1 − S)``. A Flickr30K run
takes about 35 × 900 = 32K steps.

Run: ``PYTHONPATH=src python benchmarks/bench_l2rm.py [--images N] [--head sgr|cosine]
[--epochs E] [--threads T] [--drift STEPS]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from mispair.config import load_config
from mispair.engine.run import train_run
from mispair.methods.l2rm import L2RM, reconstruct_pairs
from mispair.nn.cost_function import ExchangeableCost, LinearCost

VARIANTS = [
    ("l2rm (exchangeable)", []),
    ("l2rm (linear, ref)", ["method.cost=linear"]),
    ("l2rm (cosine cost)", ["method.cost=cosine"]),
    ("l2rm (full OT)", ["method.partial=false"]),
]


@contextmanager
def timers(targets: list[tuple[type, str]]) -> Iterator[dict[str, float]]:
    """Accumulate the wall time of each ``cls.method`` (keyed by method name) while the block runs."""
    spent: dict[str, float] = defaultdict(float)
    originals = [(cls, name, cls.__dict__[name]) for cls, name in targets]

    def wrap(label, fn):
        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[label] += time.perf_counter() - began

        return timed

    for cls, name, fn in originals:
        setattr(cls, name, wrap(name, fn))
    try:
        yield spent
    finally:
        for cls, name, fn in originals:
            setattr(cls, name, fn)


def timed_run(recipe: str, args, extra: list[str]) -> tuple[dict[str, float], float]:
    """Seconds per post-warm-up epoch of each timed part, and the run's test rSum: the training
    pass and the division from the run's ``log.jsonl``, L2RM's cost step and OT from timers."""
    with tempfile.TemporaryDirectory() as out:
        overrides = [
            f"recipe={recipe}",
            "data.source=synthetic",
            f"data.synthetic_images={args.images}",
            "data.noise.rate=0.4",
            f"model.head={args.head}",
            f"model.embed_dim={args.embed}",
            "model.word_dim=64",
            f"train.epochs={args.warmup + args.epochs}",
            f"train.batch_size={args.batch}",
            "train.lr=2e-4",
            "train.lr_decay_epochs=[]",
            f"train.threads={args.threads}",
            f"output={out}",
            *extra,
        ]
        if args.head != "cosine":  # the synthetic images have 12 fragments
            overrides.append("model.head_options={num_regions: 12}")
        config = load_config(None, overrides)
        with timers([(L2RM, "update_cost"), (L2RM, "refined_alignment")]) as spent:
            summary = train_run(config, progress=False, log=lambda m: None)
        rows = [json.loads(line) for line in (Path(out) / "log.jsonl").read_text().splitlines()]
    timed = rows[args.warmup :] or rows
    parts = {
        "_train_epoch": float(np.mean([r["seconds/train"] for r in timed])),
        "begin_epoch": float(np.mean([r["seconds/division"] for r in timed])),
    }
    parts.update({k: v / len(timed) for k, v in spent.items()})
    return parts, summary["test"]["rsum"]


def drift(steps: int, batch: int = 128, lr: float = 2e-6, seed: int = 0) -> None:
    """Replay ``steps`` Eq. 6 updates for both learnable costs and print their drift."""
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    probe = torch.rand(batch, batch, generator=gen)
    print(
        f"\ncost-function drift after {steps} Eq. 6 steps (Adam lr {lr}, batch {batch}, "
        f"sims ~ U[0, 1]); |f_c(S) − relu(1 − S)| on a fresh S:"
    )
    print(f"{'cost':>13} {'mean |Δ|':>9} {'max |Δ|':>8} {'mean cost':>10} {'zero cost':>10} {'s':>6}")
    for label, module in (
        ("linear (ref)", LinearCost(batch)),
        ("exchangeable", ExchangeableCost()),
    ):
        optimizer = torch.optim.Adam(module.parameters(), lr=lr)
        images = torch.zeros(batch, 1, 1)
        began = time.perf_counter()
        for _ in range(steps):
            _, supervision = reconstruct_pairs(images, images, 0.1, rng)
            loss = (supervision * module(torch.rand(batch, batch, generator=gen))).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            cost = module(probe)
            delta = (cost - torch.relu(1 - probe)).abs()
        print(
            f"{label:>13} {delta.mean():9.4f} {delta.max():8.4f} {cost.mean():10.4f} "
            f"{(cost == 0).float().mean():10.1%} {time.perf_counter() - began:6.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=600, help="synthetic images (×5 captions)")
    parser.add_argument("--head", default="sgr")
    parser.add_argument("--embed", type=int, default=256)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs after the warm-up")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--drift", type=int, default=0, help="cost-function steps to replay")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"synthetic {args.images} images × 5 captions, pmp noise 0.4, head {args.head}, embed "
        f"{args.embed}, batch {args.batch}, {args.threads} thread(s); mean of {args.epochs} "
        f"epoch(s) after {args.warmup} warm-up"
    )
    vse, vse_rsum = timed_run("vse", args, [])
    base = vse["_train_epoch"]
    print(
        f"{'recipe':>22} {'train s/epoch':>14} {'× vse':>6} {'division s':>11} "
        f"{'+ division × vse':>17} {'cost step s':>12} {'OT s':>7} {'test rsum':>10}"
    )
    print(f"{'vse':>22} {base:14.2f} {1:6.2f} {'-':>11} {1:17.2f} {'-':>12} {'-':>7} {vse_rsum:10.1f}")
    for label, extra in VARIANTS:
        parts, rsum = timed_run("l2rm", args, [f"method.warmup_epochs={args.warmup}", *extra])
        train, division = parts["_train_epoch"], parts["begin_epoch"]
        print(
            f"{label:>22} {train:14.2f} {train / base:6.2f} {division:11.2f} "
            f"{(train + division) / base:17.2f} {parts.get('update_cost', 0.0):12.3f} "
            f"{parts['refined_alignment']:7.3f} {rsum:10.1f}",
            flush=True,
        )
    if args.drift:
        drift(args.drift, args.batch)


if __name__ == "__main__":
    main()

"""Does L2RM's learned cost learn? Its drift from ``relu(1 − S)`` and from the fixed-cost ablation.

Trains ``l2rm`` four ways on the same data, noise and seed — the learned exchangeable cost at its
default rate (``cost_lr`` 1e-3), the same layer at D.1's 2e-6, the reference's ``Linear(B, B)`` at
2e-6, and the fixed cosine cost (Table 3, "w/o cost function") — then, with each run's final
model and cost, scores the mismatched pairs of its last division in training-size batches and
prints:

- ``drift``: mean ``|f_c(S) − relu(1 − S)|`` over those batches (0 = still at initialisation);
- ``plan Δ vs fixed``: ``Σ|π − π_fixed| / (2ρ)``, the share of the transported mass that the
  learned cost moves differently from the fixed cost ``1 − S`` on the same similarities
  (0 = the same refined alignment as the ablation, 1 = disjoint);
- the test rSum and the log's ``cost/drift_mean`` after the last epoch.

Run: ``python benchmarks/bench_l2rm_cost.py [--data synthetic|tuxpaint] [--noise 0.4] [--seed 0]``
(synthetic: 400 images, about a minute a variant on one core; tuxpaint: ``configs/l2rm/tuxpaint.yaml``,
about two minutes a variant).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import torch

from mispair.config import load_config
from mispair.data.batching import TrainingPairs, encode_captions
from mispair.engine.assembly import load_run_data
from mispair.engine.run import train_run
from mispair.engine.trained import TrainedRun
from mispair.methods.base import build_options, get_recipe
from mispair.methods.l2rm import refined_alignment
from mispair.nn.cost_function import cosine_cost, create_cost_function

VARIANTS = [
    ("exchangeable, lr 1e-3 (default)", []),
    ("exchangeable, lr 2e-6 (D.1)", ["method.cost_lr=0.000002"]),
    ("linear (ref), lr 2e-6", ["method.cost=linear", "method.cost_lr=0.000002"]),
    ("cosine (fixed cost)", ["method.cost=cosine"]),
]


def config_for(args: argparse.Namespace, out: Path, extra: list[str]):
    common = [
        f"data.noise.rate={args.noise}",
        f"data.noise.seed={args.seed}",
        f"train.seed={args.seed}",
        "train.threads=1",
        f"output={out}",
        *extra,
    ]
    if args.data == "tuxpaint":
        return load_config("configs/l2rm/tuxpaint.yaml", common)
    return load_config(
        None,
        [
            "recipe=l2rm",
            "data.source=synthetic",
            "data.synthetic_images=400",
            "data.noise.protocol=pmp",
            "model.embed_dim=64",
            "model.word_dim=32",
            "train.epochs=8",
            "train.batch_size=64",
            "method.warmup_epochs=2",
            *common,
        ],
    )


@torch.no_grad()
def compare_costs(config, out: Path) -> tuple[float, float]:
    """Mean drift of the run's cost from ``relu(1 − S)`` and its plans' distance from the fixed
    cost's, over the mismatched pairs of the last division."""
    device = torch.device("cpu")
    run = TrainedRun.open(out / "last.pt", device)
    model = run.models[0]
    options = build_options(get_recipe("l2rm"), config.method)
    cost_fn = create_cost_function(options.cost, config.train.batch_size)
    if cost_fn is not None:
        cost_fn.load_state_dict(run.recipe_state["cost_fn"])
    data = load_run_data(config)
    train = TrainingPairs(data.train, encode_captions(data.train, data.vocab), data.noise.image_of_caption)
    mismatched = np.flatnonzero(run.clean_prob < 1 - options.threshold)
    drifts, moved = [], []
    for batch in train.batches(config.train.batch_size, seed=0, subset=mismatched):
        if len(batch) < 2:
            continue
        sims = model(batch.images, batch.tokens, batch.lengths)
        cost = cosine_cost(sims) if cost_fn is None else cost_fn(sims)
        mass = min(1.0, options.rho * len(batch) / options.rho_batch)
        plans = [
            refined_alignment(c, options.reg, mass=mass, dummy_margin=options.dummy_margin)
            for c in (cost, cosine_cost(sims))
        ]
        drifts.append(float((cost - torch.relu(1 - sims)).abs().mean()))
        moved.append(float((plans[0] - plans[1]).abs().sum() / (2 * mass)))
    return float(np.mean(drifts)), float(np.mean(moved))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=("synthetic", "tuxpaint"), default="synthetic")
    parser.add_argument("--noise", type=float, default=0.4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        f"l2rm on {args.data}, pmp noise {args.noise}, seed {args.seed}; costs scored on the "
        "mismatched pairs of the last division"
    )
    print(f"{'cost':>32} {'drift':>7} {'plan Δ vs fixed':>16} {'log drift':>10} {'test rsum':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for k, (label, extra) in enumerate(VARIANTS):
            out = Path(tmp) / str(k)
            config = config_for(args, out, extra)
            summary = train_run(config, progress=False, log=lambda m: None)
            drift, moved = compare_costs(config, out)
            last = json.loads((out / "log.jsonl").read_text().splitlines()[-1])
            logged = last.get("cost/drift_mean")
            print(
                f"{label:>32} {drift:7.4f} {moved:16.3f} "
                f"{'-' if logged is None else f'{logged:.4f}':>10} "
                f"{summary['test']['rsum']:10.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()

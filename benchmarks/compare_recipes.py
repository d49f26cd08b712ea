"""Recipes side by side on the offline datasets, over noise rates and seeds.

Each run is ``configs/<recipe>/<dataset>.yaml`` with the noise rate, noise seed and training seed
set; its test metrics, the dev metrics of its best epoch (the checkpoint the test evaluates; runs
from before issue 36 have no ``dev``) and the first and last division's detection scores, when the
noise is synthetic, are kept in ``--results/<key>.json``, so an interrupted comparison resumes and
several processes can share the work (``--shard i/n``). The table prints the mean ± std over
seeds of rSum and the R@1s, and the rSum kept relative to the clean run of the same variant.

Example (Tux Paint, the issue-6 grid)::

    python benchmarks/compare_recipes.py --datasets tuxpaint --noise 0 0.4 0.7 --seeds 0 1 2 \\
        --variants vse-triplet vse-infonce rcl-log rcl-gce
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

import torch

from mispair.config import load_config
from mispair.division.scores import PAIR_SCORES_FILE
from mispair.engine.run import train_run

VARIANTS: dict[str, tuple[str, list[str]]] = {
    "vse-triplet": ("vse", ["method.loss=triplet"]),
    "vse-infonce": ("vse", ["method.loss=infonce"]),
    "rcl": ("rcl", []),
    "rcl-log": ("rcl", ["method.loss=log"]),
    "rcl-gce": ("rcl", ["method.loss=gce"]),
    "ncr": ("ncr", []),
    "ncr-bmm": ("ncr", ["method.mixture=bmm"]),
    "ncr-vbgmm": ("ncr", ["method.mixture=vbgmm"]),
    "asl": ("asl", []),
    "asl-gmm": ("asl", ["method.mixture=gmm"]),
    "pc2": ("pc2", []),
    "l2rm": ("l2rm", []),
    # L2RM Table 3 ablations, the reference's order-dependent cost, Table 4's triplet warm-up
    "l2rm-full-ot": ("l2rm", ["method.partial=false"]),
    "l2rm-no-mask": ("l2rm", ["method.mask_positives=false"]),
    "l2rm-cosine-cost": ("l2rm", ["method.cost=cosine"]),
    "l2rm-linear-cost": ("l2rm", ["method.cost=linear"]),
    "l2rm-kl": ("l2rm", ["method.rematch=kl"]),
    "l2rm-infonce": ("l2rm", ["method.rematch=infonce"]),
    "l2rm-triplet-warmup": ("l2rm", ["method.warmup_loss=triplet_hardest"]),
    # ASL Table 3 ablations (asl-gmm above)
    "asl-triplet": ("asl", ["method.loss=triplet"]),
    "asl-no-warmup": ("asl", ["method.warmup_epochs=0"]),
    "asl-detached": ("asl", ["method.detach_weights=true"]),  # circle loss's gradient
    # PC² Table 3 ablations (ncr = none of the three components)
    "pc2-no-pcap": ("pc2", ["method.pseudo_captioning=false"]),
    "pc2-no-rect": ("pc2", ["method.rectification=false"]),
    "pc2-pcap-only": (
        "pc2",
        ["method.pseudo_classification=false", "method.rectification=false", "method.caption_by=embedding"],
    ),
    "pc2-embedding": ("pc2", ["method.caption_by=embedding"]),
    # the SGR head in the plain recipe (issue 3): the reference's lr 2e-4 and gradient clipping 2,
    # 12 epochs to fit a CPU budget; vse-cosine-12 is the cosine head on the same schedule
    "vse-sgr-12": (
        "vse",
        [
            "model.head=sgr",
            "model.head_options={num_regions: 49}",
            "train.lr=2e-4",
            "train.grad_clip=2.0",
            "train.epochs=12",
            "train.lr_decay_epochs=[8]",
        ],
    ),
    "vse-cosine-12": ("vse", ["train.epochs=12", "train.lr_decay_epochs=[8]"]),
    # OMIT and its baselines (issue 4)
    "omit": ("omit", []),
    "cam": ("omit", ["model.head=cam", "model.head_options={num_regions: 49}"]),
    "cam-partial": ("omit", ["model.head=cam", "model.head_options={partial: true, num_regions: 49}"]),
    # bounds (issue 16): the same model on the truly clean pairs only
    "vse-oracle": ("vse", ["data.noise.oracle=true"]),
    # the plain baseline and its oracle with holdout's loss (InfoNCE at temperature 0.2)
    "vse-infonce-tau0.2": ("vse", ["method.loss=infonce", "method.tau=0.2"]),
    "vse-oracle-infonce-tau0.2": ("vse", ["data.noise.oracle=true", "method.loss=infonce", "method.tau=0.2"]),
    # the same oracle as an ensemble of two models, as holdout's and the co-training recipes' test
    # similarity averages two models (the matched oracle of a two-model method)
    "vse2-oracle-infonce": (
        "vse",
        ["recipe=vse2", "data.noise.oracle=true", "method.loss=infonce", "method.tau=0.2"],
    ),
    "vse2-infonce": ("vse", ["recipe=vse2", "method.loss=infonce", "method.tau=0.2"]),
    # the seed recipes with holdout's loss (issue 36): each pair's InfoNCE at τ 0.2 weighted by the
    # recipe's own trust (method.loss=infonce; l2rm-infonce above is L2RM's InfoNCE rematch loss)
    "ncr-infonce": ("ncr", ["method.loss=infonce", "method.tau=0.2"]),
    "asl-infonce": ("asl", ["method.loss=infonce", "method.tau=0.2"]),
    "pc2-infonce": ("pc2", ["method.loss=infonce", "method.tau=0.2"]),
    "l2rm-infonce-loss": ("l2rm", ["method.loss=infonce", "method.loss_tau=0.2"]),
    # mispair's own recipe and its ablations
    "holdout": ("holdout", []),
    "holdout-hard": ("holdout", ["method.weighting=hard"]),
    "holdout-no-suspect": ("holdout", ["method.suspect_loss=none"]),
    "holdout-triplet": ("holdout", ["method.loss=triplet", "method.tau=0.05", "method.hardest_after=2"]),
    "holdout-tau0.05": ("holdout", ["method.tau=0.05"]),
    "holdout-tau0.1": ("holdout", ["method.tau=0.1"]),
    "holdout-scorer-tau0.05": ("holdout", ["division.scorer_options={loss: infonce, tau: 0.05}"]),
    "holdout-1-repeat": ("holdout", ["division.repeats=1"]),
    "holdout-r2": ("holdout", ["division.rounds=2"]),
    "holdout-r1": ("holdout", ["division.rounds=1"]),
    "holdout-similarity": ("holdout", ["division.pair_score=similarity"]),
    "holdout-early": ("holdout", ["division.scored_by=early", "division.epochs=2"]),
    # issue 37: IN2R's neighbour-built targets for the suspected pairs (weight 1: IN2R's ½ + ½)
    "holdout-in2r": ("holdout", ["method.suspect_loss=neighbours", "method.suspect_weight=1.0"]),
    "holdout-in2r-mean": (
        "holdout",
        ["method.suspect_loss=neighbours", "method.suspect_weight=1.0", "method.refiner=mean"],
    ),
    # issue 37: GSC's structure-consistency check on the held-out scores; MGCS's corrected similarity
    "holdout-gsc": ("holdout", ["division.pair_score=contrast_structure"]),
    "holdout-mgcs": ("holdout", ["division.pair_score=gap_corrected"]),
    "holdout-p0.7": ("holdout", ["division.p_threshold=0.7"]),
    "holdout-gce0.3": ("holdout", ["method.q=0.3"]),
    "holdout-gce0.7": ("holdout", ["method.q=0.7"]),
    "holdout-reference-division": ("holdout", ["division.reference=true"]),
    "holdout-repeats5": ("holdout", ["division.repeats=5"]),
    "holdout-hard-p0.9": ("holdout", ["method.weighting=hard", "division.p_threshold=0.9"]),
    "holdout-in2r-tau0.2": (
        "holdout",
        ["method.suspect_loss=neighbours", "method.suspect_weight=1.0", "method.neighbour_tau=0.2"],
    ),
    "holdout-gsc-in2r": (
        "holdout",
        [
            "division.pair_score=contrast_structure",
            "method.suspect_loss=neighbours",
            "method.suspect_weight=1.0",
            "method.neighbour_tau=0.2",
        ],
    ),
}
# the backbone of the papers (issue 16's "before"): BiGRU text encoder, mean of projected fragments
BIGRU = ["model.text_encoder=bigru", "model.image_pooling=fragments", "model.word_dim=300"]
VARIANTS.update(
    {
        f"{name}-bigru": (VARIANTS[name][0], [*VARIANTS[name][1], *BIGRU])
        for name in ("vse-triplet", "vse-infonce", "rcl-log", "ncr", "asl", "pc2", "l2rm")
    }
)
# the same image path as the pretrained backbone with the BiGRU text encoder (the epoch-cost comparison)
VARIANTS["asl-bigru-pooled"] = ("asl", ["model.text_encoder=bigru", "model.word_dim=300"])
# the seed recipes dividing on out-of-fold scores (holdout's division) instead of their own losses
HELD_OUT = [
    "division.scored_by=out_of_fold",
    "division.rounds=2",
    "division.pair_score=contrast",
    "division.epochs=5",
]
VARIANTS.update({f"{r}-oof": (r, HELD_OUT) for r in ("ncr", "asl", "pc2", "l2rm")})
# ASL's hyperparameter analysis: z × λ
VARIANTS.update(
    {
        f"asl-z{z:g}-l{lam}": ("asl", [f"method.z={z}", f"method.scale={lam}"])
        for z in (2.0, 3.0, 5.0)
        for lam in (32, 64, 96)
    }
)


def run_key(dataset: str, variant: str, noise: float, seed: int, extra: list[str]) -> str:
    suffix = ("_" + "_".join(e.replace("=", "-").replace(".", "") for e in extra)) if extra else ""
    return f"{dataset}_{variant}_n{noise:g}_s{seed}{suffix}"


CLEAN_REFERENCE = "clean-reference"
"""Not a recipe: the clean-trained reference detector, the out-of-fold AUC of scorers trained on
the truly clean pairs only, with the division settings of ``configs/holdout/<dataset>.yaml``. Not an
upper bound: a division trained on the noisy pairs can exceed it. (Named ``ceiling`` before issue 36;
its JSONs were renamed.)"""
BASELINE, ORACLE = "vse-triplet", "vse-oracle"
STRONG_BASELINE, STRONG_ORACLE = "vse-infonce-tau0.2", "vse-oracle-infonce-tau0.2"


def clean_reference_detection(dataset: str, noise: float, seed: int, extra: list[str]) -> dict:
    from sklearn.metrics import roc_auc_score

    from mispair.data.batching import TrainingPairs
    from mispair.engine.assembly import load_run_data, pick_device, prepare_text_encoder
    from mispair.engine.held_out import HeldOutScoring, RoundStart, Runtime, out_of_fold_scores

    config = load_config(
        f"configs/holdout/{dataset}.yaml",
        [
            f"data.noise.rate={noise}",
            f"data.noise.seed={seed}",
            f"train.seed={seed}",
            "data.noise.protocol=pmp",
            *extra,
        ],
    )
    torch.set_num_threads(config.train.threads)
    began = time.perf_counter()
    data = load_run_data(config)
    prepare_text_encoder(config.model, config.data, data.train_tokens, log=lambda m: None)
    train = TrainingPairs(data.train, data.train_tokens, data.noise.image_of_caption)
    clean = ~data.noise.is_noisy
    scores = out_of_fold_scores(
        HeldOutScoring.of(config),
        data,
        train,
        runtime=Runtime(pick_device(config.train.device)),
        round_start=RoundStart(trusted=clean),
    ).score
    seconds = round(time.perf_counter() - began, 1)
    return {
        "dataset": dataset,
        "variant": CLEAN_REFERENCE,
        "noise": noise,
        "seed": seed,
        "extra": extra,
        "auc": float(roc_auc_score(clean, scores)),
        "seconds": seconds,
    }


def run_one(dataset: str, variant: str, noise: float, seed: int, extra: list[str], runs: Path) -> dict:
    if variant == CLEAN_REFERENCE:
        return clean_reference_detection(dataset, noise, seed, extra)
    recipe, overrides = VARIANTS[variant]
    key = run_key(dataset, variant, noise, seed, extra)
    config = load_config(
        f"configs/{recipe}/{dataset}.yaml",
        [
            *overrides,
            f"data.noise.rate={noise}",
            f"data.noise.seed={seed}",
            f"train.seed={seed}",
            "data.noise.protocol=pmp",
            f"output={runs / key}",
            *extra,
        ],
    )
    began = time.perf_counter()
    share_division(runs, runs / key, dataset, noise, seed)
    summary = train_run(config, resume=True, progress=False, log=lambda m: None)
    log = [json.loads(x) for x in (runs / key / "log.jsonl").read_text().splitlines()]
    first, last = division_records(log)
    return {
        "dataset": dataset,
        "variant": variant,
        "noise": noise,
        "seed": seed,
        "extra": extra,
        "test": summary["test"],
        "dev": summary["dev"],
        "best_epoch": summary["best_epoch"],
        "detection_first": first,
        "detection": last,
        "seconds": round(time.perf_counter() - began, 1),
        "seconds_per_epoch": statistics.median(r["seconds"] for r in log),
    }


def share_division(runs: Path, folder: Path, dataset: str, noise: float, seed: int) -> None:
    """Seed ``folder`` with the held-out scores of a ``holdout`` run (any variant) at the same
    data, noise and seed, when it has none: the run reads them only if they were made for its own
    division (the cache's key), else scores its pairs itself. Saves the division's cost for every
    ``holdout`` variant that changes only the training."""
    if (folder / PAIR_SCORES_FILE).exists():
        return
    for base in sorted(runs.glob(f"{run_key(dataset, 'holdout', noise, seed, [])}*/{PAIR_SCORES_FILE}")):
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(base, folder / PAIR_SCORES_FILE)
        return


def division_records(log: list[dict]) -> tuple[dict, dict]:
    """The first and last epoch's ``division/`` values of a run log, keyed as the co-training
    recipes log them (``division/0/auc``; a single-model recipe's ``division/auc`` counts as
    model 0's)."""
    rows = [
        {
            k.replace("division/", "division/0/", 1) if k.count("/") == 1 else k: v
            for k, v in r.items()
            if k.startswith("division/")
        }
        for r in log
    ]
    divided = [r for r in rows if "division/0/clean_fraction" in r] or [{}]
    return divided[0], divided[-1]


def _mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def _mean_rsum(groups: dict[tuple, list[dict]], key: tuple) -> float | None:
    runs = groups.get(key)
    return statistics.mean(r["test"]["rsum"] for r in runs) if runs else None


def gap_closed(rsum: float, baseline: float | None, oracle: float | None) -> str:
    """``(rSum − baseline) / (oracle − baseline)`` as a percentage, or '' without both bounds."""
    if baseline is None or oracle is None or oracle <= baseline:
        return ""
    return f"{100 * (rsum - baseline) / (oracle - baseline):.0f}%"


def print_table(results: list[dict]) -> None:
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["dataset"], r["variant"], r["noise"]), []).append(r)
    print(
        f"gap closed = (rSum − {BASELINE}) / ({ORACLE} − {BASELINE}); gap closed, InfoNCE: the same with "
        f"{STRONG_BASELINE} and {STRONG_ORACLE}; AUC beside the clean-trained reference detector "
        "(out-of-fold scorers trained on the truly clean pairs; not a bound)"
    )
    print(
        "| dataset | variant | noise | seeds | rSum | i2t R@1 | t2i R@1 | rSum kept | gap closed "
        "| gap closed, InfoNCE | eq. rSum | AUC first division | AUC last (clean reference) | s/epoch |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (dataset, variant, noise), rs in sorted(groups.items()):
        if variant == CLEAN_REFERENCE:
            continue
        reference = groups.get((dataset, CLEAN_REFERENCE, noise))
        reference_text = f" ({statistics.mean(c['auc'] for c in reference):.3f})" if reference else ""
        baseline, oracle = (_mean_rsum(groups, (dataset, v, noise)) for v in (BASELINE, ORACLE))
        gap = gap_closed(statistics.mean(r["test"]["rsum"] for r in rs), baseline, oracle)
        strong_bounds = (_mean_rsum(groups, (dataset, v, noise)) for v in (STRONG_BASELINE, STRONG_ORACLE))
        strong = gap_closed(statistics.mean(r["test"]["rsum"] for r in rs), *strong_bounds)
        rsum = [r["test"]["rsum"] for r in rs]
        clean = groups.get((dataset, variant, 0.0))
        kept = (
            f"{100 * statistics.mean(rsum) / statistics.mean(c['test']['rsum'] for c in clean):.0f}%"
            if clean and noise > 0
            else ""
        )
        eq = [r["test"]["eq_rsum"] for r in rs if "eq_rsum" in r["test"]]
        auc = [r["detection"]["division/0/auc"] for r in rs if "division/0/auc" in r["detection"]]
        first = [
            r["detection_first"]["division/0/auc"]
            for r in rs
            if "division/0/auc" in r.get("detection_first", {})
        ]
        print(
            f"| {dataset} | {variant} | {noise:g} | {len(rs)} | {_mean_std(rsum)} "
            f"| {_mean_std([r['test']['i2t_r1'] for r in rs])} "
            f"| {_mean_std([r['test']['t2i_r1'] for r in rs])} | {kept} | {gap} | {strong} "
            f"| {_mean_std(eq) if eq else ''} | {f'{statistics.mean(first):.3f}' if first else ''} "
            f"| {f'{statistics.mean(auc):.3f}' if auc else ''}{reference_text} "
            f"| {statistics.median(r['seconds_per_epoch'] for r in rs):.1f} |"
        )


def _claim(result: Path) -> bool:
    """Atomically mark a job as taken, so workers started on the same job list share it."""
    try:
        result.with_suffix(".running").open("x").close()
    except FileExistsError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="+", default=["tuxpaint"])
    parser.add_argument(
        "--variants", nargs="+", default=["vse-triplet", "rcl-log"], choices=[*VARIANTS, CLEAN_REFERENCE]
    )
    parser.add_argument("--noise", nargs="+", type=float, default=[0.0, 0.4, 0.7])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--set", nargs="*", default=[], help="extra key=value overrides for every run")
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/pretrained"))
    parser.add_argument("--runs", type=Path, default=Path("runs/compare"))
    parser.add_argument(
        "--shard",
        default="0/1",
        help="i/n: run every n-th job starting at i "
        "(workers on the same jobs also skip the ones another has claimed)",
    )
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    index, count = (int(x) for x in args.shard.split("/"))
    args.results.mkdir(parents=True, exist_ok=True)
    jobs = [
        (d, v, n, s) for d in args.datasets for v in args.variants for n in args.noise for s in args.seeds
    ]
    for d, v, n, s in jobs[index::count]:
        path = args.results / f"{run_key(d, v, n, s, args.set)}.json"
        if args.table_only or path.is_file() or not _claim(path):
            continue
        try:
            result = run_one(d, v, n, s, args.set, args.runs)
            path.write_text(json.dumps(result, indent=1) + "\n")
        finally:
            path.with_suffix(".running").unlink(missing_ok=True)
        headline = (
            f"auc {result['auc']:.3f}" if v == CLEAN_REFERENCE else f"rsum {result['test']['rsum']:.1f}"
        )
        print(f"{path.stem}: {headline} ({result['seconds']:.0f}s)", flush=True)
    wanted = {run_key(d, v, n, s, args.set) for d, v, n, s in jobs}
    results = [json.loads(p.read_text()) for p in sorted(args.results.glob("*.json")) if p.stem in wanted]
    print_table(results)


if __name__ == "__main__":
    main()

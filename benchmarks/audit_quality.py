"""How well and how fast ``mispair audit`` finds planted mismatches, beside the detection ceiling.

For each dataset and seed: ``mispair audit`` with ``--plant RATE --seed SEED`` (the default run),
its detection AUC against the planted pairs, the ceiling of the benchmark tables for the same
noise (``benchmarks/results/pretrained/<dataset>_ceiling_n<rate>_s<seed>.json``: out-of-fold
scorers trained on the truly clean pairs only), and the audit's wall time. A finished audit in
``--runs`` is reused (delete the folder to time it again).

    python benchmarks/audit_quality.py --datasets tuxpaint openclipart --seeds 0 1 2 --plant 0.4

``--user-collection``: the audit as a user meets it. Tux Paint's 950 stamp pictures are copied into
a folder with a ``captions.csv`` (``image,caption``, no split column) in which ``--dirty`` of the
captions were already swapped between pictures (the collection's own mismatches, recorded only
here); ``mispair audit FOLDER --plant RATE`` then plants more and checks itself. Printed per seed:
the share of rows scored (every one), the self-check's estimated AUC beside the true AUC on all
mismatched pairs (the collection's own and the planted), the AUC measured on the planted swaps
alone, and the estimated mismatched share (with its interval) beside the truth.

    python benchmarks/audit_quality.py --user-collection --dirty 0.25 --plant 0.1 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from mispair.audit import audit_collection

RESULTS = Path(__file__).parent / "results"


def ceiling(dataset: str, rate: float, seed: int) -> float | None:
    path = RESULTS / "pretrained" / f"{dataset}_ceiling_n{rate:g}_s{seed}.json"
    return json.loads(path.read_text())["auc"] if path.is_file() else None


def user_collection(folder: Path, dirty: float, seed: int) -> dict[str, str]:
    """Tux Paint's pictures and captions as a user's folder (``images/`` + ``captions.csv``, no
    split column) with ``dirty`` of the captions swapped between pictures; returns each row's
    (pair id = its row number) true picture."""
    import csv
    import shutil

    from mispair.data.readers.precomputed import PICTURE_DIRS

    precomp, stamps = Path("data/tuxpaint_precomp"), PICTURE_DIRS[0]
    ids, captions = [], []
    for split in ("train", "dev", "test"):
        ids += (precomp / f"{split}_ids.txt").read_text(encoding="utf-8").splitlines()
        captions += (precomp / f"{split}_caps.txt").read_text(encoding="utf-8").splitlines()
    rng = np.random.default_rng(1000 + seed)
    shown = np.arange(len(ids))
    swapped = np.flatnonzero(rng.random(len(ids)) < dirty)
    shown[swapped] = swapped[np.roll(rng.permutation(len(swapped)), 1)]  # a cycle: none stays put
    (folder / "images").mkdir(parents=True, exist_ok=True)
    for name in ids:
        target = folder / "images" / name.replace("/", "__")
        if not target.is_file():
            shutil.copyfile(stamps / name, target)
    with open(folder / "captions.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["image", "caption"])
        for row, caption in enumerate(captions):
            writer.writerow([f"images/{ids[shown[row]].replace('/', '__')}", caption])
    return {str(row): f"images/{name.replace('/', '__')}" for row, name in enumerate(ids)}


def audit_user_collection(args: argparse.Namespace) -> None:
    from sklearn.metrics import roc_auc_score

    lines = [f"# mispair audit of a dirty user collection (Tux Paint, {args.dirty:g} swapped, no split "
             f"column) with --plant {args.plant}: the self-check against the truth", "",
             "| seed | rows | scored | true AUC | self-check estimate | estimate − true | "
             "measured on planted | originals mismatched: true | self-check | "
             "all pairs mismatched: true | mixture (95% interval) | audit seconds |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for seed in args.seeds:
        folder = Path(args.runs) / f"user_tuxpaint_d{args.dirty:g}_s{seed}"
        true_image = user_collection(folder / "collection", args.dirty, seed)
        started = time.time()
        result = audit_collection(folder / "collection", folder / "audit", plant=args.plant, seed=seed,
                                  progress=False, log=lambda _: None)  # fmt: skip
        seconds, summary, pairs = time.time() - started, result.summary, result.pairs
        truth = np.array([true_image[p] != image for p, image in zip(pairs["pair_id"], pairs["image_id"])])
        planted = pairs["truly_mismatched"].to_numpy(dtype=bool)  # the audit knows only its own swaps
        auc = roc_auc_score(truth, -pairs["held_out_score"].to_numpy())
        check, (low, high) = summary["self_check"], summary["estimated_mismatched_share_interval"]
        lines.append(f"| {seed} | {len(true_image)} | {summary['pairs_scored'] / len(true_image):.0%} | "
                     f"{auc:.3f} | {check['estimated_auc']:.3f} | {check['estimated_auc'] - auc:+.3f} | "
                     f"{check['measured_auc']:.3f} | {truth[~planted].mean():.3f} | "
                     f"{check['originals_mismatched_share']:.3f} | {truth.mean():.3f} | "
                     f"{summary['estimated_mismatched_share']:.3f} ({low:.3f}–{high:.3f}) | "
                     f"{seconds:.0f} |")  # fmt: skip
        print(lines[-1], flush=True)
    lines += ["", "Rows: the rows of captions.csv; scored: the share of them in pairs.csv with a held-out "
              "score. True AUC: the ranking's ROC-AUC on every truly mismatched pair (the collection's "
              "own swaps and the planted ones) against the truly matched pairs. Originals mismatched: "
              "the share of the collection's own pairs (all but the planted) that are swapped, and the "
              "self-check's estimate of it from the planted swaps (Storey's estimator); all pairs: the "
              "share over every pair, and the two-component mixture's estimate (the summary's "
              "estimated_mismatched_share)."]  # fmt: skip
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--user-collection", action="store_true",
                        help="audit Tux Paint as a dirty user folder (see above)")
    parser.add_argument("--dirty", type=float, default=0.25, help="the user collection's own swapped share")
    parser.add_argument("--datasets", nargs="+", default=["tuxpaint"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--plant", type=float, default=0.4)
    parser.add_argument("--runs", default="runs/audit_quality")
    parser.add_argument("--out", default=str(RESULTS / "audit_quality.md"))
    args = parser.parse_args()
    if args.user_collection:
        return audit_user_collection(args)
    lines = [f"# mispair audit with --plant {args.plant}: detection against the ceiling", "",
             "| dataset | seed | pairs | AUC | ceiling | ceiling − AUC | average precision | precision | "
             "recall | estimated share | audit seconds |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for dataset in args.datasets:
        gaps = []
        for seed in args.seeds:
            out = Path(args.runs) / f"{dataset}_p{args.plant:g}_s{seed}"
            started = time.time()
            summary = audit_collection(f"data/{dataset}_precomp", out, plant=args.plant, seed=seed,
                                       progress=False, log=lambda _: None).summary  # fmt: skip
            seconds = time.time() - started
            d, top = summary["detection"], ceiling(dataset, args.plant, seed)
            gap = "" if top is None else f"{top - d['auc']:.3f}"
            if top is not None:
                gaps.append(top - d["auc"])
            lines.append(f"| {dataset} | {seed} | {summary['pairs']} | {d['auc']:.3f} | "
                         f"{'' if top is None else f'{top:.3f}'} | {gap} | {d['average_precision']:.3f} | "
                         f"{d['precision']:.2f} | {d['recall']:.2f} | "
                         f"{summary['estimated_mismatched_share']:.2f} | {seconds:.0f} |")  # fmt: skip
            print(lines[-1], flush=True)
        if gaps:
            lines.append(f"| {dataset} | mean | | | | {np.mean(gaps):.3f} | | | | | |")
    lines += ["", "Audit seconds: wall time of the whole audit (scoring, training, ranking, report) on this "
              "machine's 2 CPU cores; 0–20 s when a finished run was reused."]  # fmt: skip
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

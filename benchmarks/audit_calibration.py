"""Are the audit's numbers true? The mismatched share, its interval, the mismatch probabilities
and the drop threshold's error, measured on collections whose truth this benchmark knows.

Each collection is written as a user's folder (pictures + ``captions.csv``, no split column) in
which a share of the captions was swapped between pictures (pmp: each swapped caption now
describes another picture; recorded here only). The audit's held-out scoring (its default run,
the decoys beside the real pairs) runs on it, and its scores are kept
(``results/calibration/scores/<collection>.npz``); the ``table`` stage then reads every pair's
calibrated numbers (:func:`mispair.division.calibration.calibrate`, what the audit reports) and
the old mixture estimate beside them, against the truth.

    python benchmarks/audit_calibration.py score --collections tuxpaint icons synthetic \\
        --rates 0 0.2 0.4 0.7 --seeds 0 1 2
    python benchmarks/audit_calibration.py table > benchmarks/results/calibration/table.md

A variant of the audit's run scores into its own folder and is tabled from it, e.g. the three
refinement rounds without nested trust that the audit ran before (``three_rounds/``):

    python benchmarks/audit_calibration.py score --collections tuxpaint --rates 0 0.2 0.4 0.7 \
        --override division.rounds=3 --override division.nested_trust=false \
        --scores benchmarks/results/calibration/three_rounds/scores
    python benchmarks/audit_calibration.py table --scores benchmarks/results/calibration/three_rounds/scores

Collections: ``tuxpaint`` (the 950 stamps of the Debian package, their English descriptions),
``tuxpaint_near`` (the same, each swap within a stamp category: a caption of a similar picture,
a near miss), ``openclipart`` (the package's clips with a title, at most ``--openclipart-max`` of
them), ``icons`` (the Adwaita icon theme's distinct names at one size, captioned by their file
names: "folder pictures"), ``icons_symbolic`` (the theme's monochrome icons, the same way),
``synthetic`` (``mispair.data.synthetic``'s precomputed splits, the
swaps planted by the audit itself into the training split: ``--plant``).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
RESULTS = HERE / "results" / "calibration"
SCORES = RESULTS / "scores"
WORK = Path("runs/calibration")


def tuxpaint_pairs() -> list[tuple[Path, str]]:
    from mispair.data.sources.tuxpaint import find_stamps

    return [(s.image, s.descriptions["en"]) for s in find_stamps(Path("/usr/share/tuxpaint/stamps"))]


def openclipart_pairs(most: int) -> list[tuple[Path, str]]:
    from mispair.data.sources.openclipart import find_clips, make_caption

    clips = find_clips(Path("/usr/share/openclipart/png"), Path("/usr/share/openclipart/svg"))
    titled = [c for c in clips if c.meta.title]
    rng = np.random.default_rng(12345)
    keep = np.sort(rng.choice(len(titled), size=min(most, len(titled)), replace=False))
    return [(titled[k].png, make_caption(titled[k])) for k in keep]


def icon_pairs() -> list[tuple[Path, str]]:
    """Adwaita's icons at the size that has the most, one per name, captioned by the name."""
    root = Path("/usr/share/icons/Adwaita")
    sizes = {}
    for png in root.rglob("*.png"):
        if "symbolic" in png.name:  # the monochrome variants: another drawing of the same name
            continue
        sizes.setdefault(png.relative_to(root).parts[0], []).append(png)
    pictures = max(sizes.values(), key=len)
    by_name = {}
    for png in sorted(pictures):
        by_name.setdefault(png.stem, png)
    return [(png, " ".join(re.findall(r"[a-z0-9]+", name.lower()))) for name, png in sorted(by_name.items())]


def symbolic_icon_pairs() -> list[tuple[Path, str]]:
    """Adwaita's monochrome (symbolic) icons at the size that has the most, one per name,
    captioned by the name less "symbolic": another drawing style than :func:`icon_pairs`."""
    root = Path("/usr/share/icons/Adwaita")
    sizes: dict[str, list[Path]] = {}
    for png in root.rglob("*-symbolic.symbolic.png"):
        sizes.setdefault(png.relative_to(root).parts[0], []).append(png)
    pictures = max(sizes.values(), key=len)
    by_name = {}
    for png in sorted(pictures):
        by_name.setdefault(png.name.removesuffix("-symbolic.symbolic.png"), png)
    return [(png, " ".join(re.findall(r"[a-z0-9]+", name.lower()))) for name, png in sorted(by_name.items())]


def synthetic_collection(folder: Path) -> Path:
    """``mispair.data.synthetic``'s precomputed splits (400 / 50 / 50 images, 5 captions each):
    the audit plants the swaps into its training split (``--plant``), as a user would."""
    from mispair.data.synthetic import write_synthetic_dataset

    return write_synthetic_dataset(folder, n_train=400, n_dev=50, n_test=50)


def write_collection(
    folder: Path, pairs: list[tuple[Path, str]], rate: float, seed: int, near: bool = False
) -> np.ndarray:
    """``pairs`` as a folder (``images/`` + ``captions.csv``) with ``rate`` of the captions swapped
    in cycles (none stays with its picture); ``near``: each cycle within one folder of the source
    (a Tux Paint category: a caption of a similar picture, a near miss). Returns each row's truth
    (True: mismatched)."""
    rng = np.random.default_rng(1000 + seed)
    n = len(pairs)
    shown = np.arange(n)
    swapped = np.sort(rng.choice(n, size=round(rate * n), replace=False)) if rate > 0 else np.zeros(0, int)
    folders = np.array([str(path.parent) for path, _ in pairs]) if near else np.zeros(n, dtype=str)
    for name in np.unique(folders[swapped]):
        cycle = swapped[folders[swapped] == name]
        if len(cycle) > 1:
            shown[cycle] = cycle[np.roll(rng.permutation(len(cycle)), 1)]
    names = []
    (folder / "images").mkdir(parents=True, exist_ok=True)
    for k, (source, _) in enumerate(pairs):
        name = f"images/{k:06d}{source.suffix}"
        names.append(name)
        if not (folder / name).is_file():
            shutil.copyfile(source, folder / name)
    with open(folder / "captions.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "caption"])
        for row in range(n):
            writer.writerow([names[shown[row]], pairs[row][1]])
    captions = np.array([c for _, c in pairs], dtype=object)
    return captions[shown] != captions  # a swap between two identical captions is no mismatch


def collection_pairs(name: str, folder: Path, args: argparse.Namespace) -> list[tuple[Path, str]]:
    if name in ("tuxpaint", "tuxpaint_near"):
        return tuxpaint_pairs()
    if name == "openclipart":
        return openclipart_pairs(args.openclipart_max)
    if name == "icons":
        return icon_pairs()
    if name == "icons_symbolic":
        return symbolic_icon_pairs()
    raise SystemExit(f"unknown collection {name!r}")


def held_out_scores(
    folder: Path,
    truth_of_row: np.ndarray | None,
    out: Path,
    plant: float | None = None,
    seed: int = 0,
    overrides: tuple[str, ...] = (),
) -> dict[str, np.ndarray]:
    """The audit's held-out scoring of the folder (its default run), as the audit runs it."""
    import torch

    from mispair.audit.collection import audit_config
    from mispair.data.loading import concrete_source
    from mispair.engine.assembly import (
        concrete_precision,
        load_run_data,
        other_splits,
        prepare_text_encoder,
        training_pairs,
    )
    from mispair.engine.checks import check_run_config
    from mispair.engine.held_out import Runtime, division_scores

    config = audit_config(folder, out, plant=plant, seed=seed, overrides=overrides)
    check_run_config(config)
    config = replace(config, data=concrete_source(config.data))
    data = load_run_data(config)
    train, _ = training_pairs(config, data)
    others = other_splits(config, data)
    config = replace(config, model=concrete_precision(config.model, config.data, lambda m: None))
    tokens = data.train_tokens + data.dev_tokens + others.tokens
    prepare_text_encoder(config.model, config.data, tokens, log=lambda m: None)
    if config.train.threads > 0:
        torch.set_num_threads(config.train.threads)
    scores = division_scores(config, data, train, Runtime(progress=True), others=others)
    if truth_of_row is None:  # planted by the audit: its noise record is the truth
        truth, truth_others = data.noise.is_noisy, np.zeros(len(others), dtype=bool)
    else:
        ids = list(train.pairs.pair_ids) + list(others.pairs.pair_ids)
        rows = np.array([int(i) for i in ids])
        truth, truth_others = truth_of_row[rows[: len(train)]], truth_of_row[rows[len(train) :]]
    return {
        "score": scores.train,
        "others": scores.others,
        "null": scores.null,
        "null_others": scores.null_others,
        "truth": truth,
        "truth_others": truth_others,
    }


def placebo_features(share: float, salt: int = 0) -> None:
    """Move ``share`` of the picture features' float16 entries one float16 step up or down, the
    entries and the direction drawn from a digest of each batch's features and ``salt`` (the same
    pictures are moved alike in every seed's audit; another ``salt``, another placebo): a change
    of the features of the size ONNX Runtime's rounding makes (``--placebo``;
    ``results/encoder_speed.md``), that no one would call a change of the encoder. Patches this
    process's :class:`mispair.data.features.GridRunner`."""
    from mispair.data.features import GridRunner

    encode = GridRunner._encode

    def moved(self, run, batch):  # type: ignore[no-untyped-def]
        out = encode(self, run, batch)
        digest = hashlib.sha256(out.tobytes() + str(salt).encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        where = rng.random(out.shape) < share
        step = np.where(rng.random(out.shape) < 0.5, np.float16(np.inf), np.float16(-np.inf))
        out[where] = np.nextafter(out[where], step[where])
        return out

    GridRunner._encode = moved  # type: ignore[method-assign]


def score(args: argparse.Namespace) -> None:
    if args.placebo:
        placebo_features(args.placebo, args.placebo_salt)
    scores = Path(args.scores)
    scores.mkdir(parents=True, exist_ok=True)
    for name in args.collections:
        for rate in args.rates:
            for seed in args.seeds:
                tag = f"{name}_r{rate:g}_s{seed}"
                target = scores / f"{tag}.npz"
                if target.is_file() and not args.again:
                    continue
                started = time.time()
                folder = WORK / tag
                overrides = (f"data.cache_dir={args.cache_dir}",) if args.cache_dir else ()
                overrides += tuple(args.override)
                if name == "synthetic":
                    collection = synthetic_collection(folder / "collection")
                    found = held_out_scores(
                        collection, None, folder / "audit", plant=rate, seed=seed, overrides=overrides
                    )
                else:
                    pairs = collection_pairs(name, WORK / name, args)
                    near = name.endswith("_near")
                    truth = write_collection(folder / "collection", pairs, rate, seed, near=near)
                    found = held_out_scores(
                        folder / "collection", truth, folder / "audit", overrides=overrides
                    )
                np.savez(target, **{k: v for k, v in found.items() if v is not None})
                everything = np.concatenate([found["truth"], found["truth_others"]])
                print(
                    f"{tag}: {len(everything)} pairs, {everything.mean():.3f} mismatched, "
                    f"{time.time() - started:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
                if not args.keep:
                    shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="stage", required=True)
    run = sub.add_parser("score")
    run.add_argument("--collections", nargs="+", default=["tuxpaint", "icons", "synthetic"])
    run.add_argument("--rates", nargs="+", type=float, default=[0.0, 0.2, 0.4, 0.7])
    run.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    run.add_argument("--openclipart-max", type=int, default=3000)
    run.add_argument("--again", action="store_true")
    run.add_argument(
        "--cache-dir",
        help="one feature cache for every collection (its pictures are the same: extracted once)",
    )
    run.add_argument("--keep", action="store_true")
    run.add_argument(
        "--override",
        action="append",
        default=[],
        help="a setting of the audit's run, KEY=VALUE (repeatable): a variant, scored into its own --scores",
    )
    run.add_argument("--scores", default=str(SCORES), help="where the scores go (a variant's folder)")
    run.add_argument(
        "--placebo",
        type=float,
        default=0.0,
        help="move this share of the picture features' float16 entries one step (placebo_features); "
        "give it its own --cache-dir",
    )
    run.add_argument("--placebo-salt", type=int, default=0, help="another placebo (another --cache-dir)")
    tab = sub.add_parser("table")
    tab.add_argument("--scores", default=str(SCORES), help="the scores read (rows.json beside them)")
    args = parser.parse_args()
    if args.stage == "score":
        score(args)
    else:
        table(Path(args.scores))


OLD_RESAMPLES = 30
"""Bootstrap resamples of the old mixture estimate's interval (its point estimate needs none; each
resample refits the mixture, the table's slow part)."""


def row(path: Path) -> dict[str, float]:
    """The calibrated numbers of one collection's scores against its truth, beside the old
    mixture estimate."""
    from sklearn.metrics import roc_auc_score

    from mispair.audit.selfcheck import mismatched_share
    from mispair.division.calibration import Stratum, calibrate

    saved = np.load(path)
    strata = [Stratum(saved["score"], saved["null"]), Stratum(saved["others"], saved["null_others"])]
    truth = np.concatenate([saved["truth"], saved["truth_others"]])
    score = np.concatenate([saved["score"], saved["others"]])
    found = calibrate(strata)
    old = mismatched_share(score, resamples=OLD_RESAMPLES)
    p = found.mismatch_probability
    bins = np.clip((p * 10).astype(int), 0, 9)
    ece = sum(abs(p[bins == b].mean() - truth[bins == b].mean()) * (bins == b).sum() for b in set(bins))
    suspected = found.suspected(0.1)
    return {
        "pairs": len(truth),
        "true": truth.mean(),
        "old": old.estimate,
        "old_low": old.low,
        "old_high": old.high,
        "share": found.share,
        "low": found.share_low,
        "high": found.share_high,
        "auc": roc_auc_score(truth, -score) if 0 < truth.sum() < len(truth) else float("nan"),
        "separation": found.separation_auc,
        "ece": ece / len(truth),
        "suspected": suspected.mean(),
        "realized_fdr": float(1 - truth[suspected].mean()) if suspected.any() else 0.0,
        "estimated_fdr": found.drop_errors(suspected)[0],
        "kept_mismatched": float(truth[~suspected].mean()),
        "estimated_kept": found.drop_errors(suspected)[1],
    }


def table(scores: Path = SCORES) -> None:
    cache = scores.parent / "rows.json"
    known = json.loads(cache.read_text()) if cache.is_file() else {}
    rows = {}
    for path in sorted(scores.glob("*.npz")):  # a row is computed again when its scores changed
        fresh, digest = known.get(path.stem), hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        if fresh is None or fresh.get("scores") != digest:
            fresh = {**row(path), "scores": digest}
            known[path.stem] = fresh
            cache.write_text(json.dumps(known, indent=1, default=float))
        rows[path.stem] = fresh
    print(
        "| collection | pairs | truly mismatched | old estimate (interval) | new estimate (interval) "
        "| covered | AUC | est. AUC | ECE | suspected (q ≤ 0.1) | realized FDR | estimated FDR "
        "| mismatched kept (est.) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        covered = "yes" if r["low"] <= r["true"] <= r["high"] else "**no**"
        print(
            f"| {name} | {r['pairs']} | {r['true']:.3f} "
            f"| {r['old']:.3f} ({r['old_low']:.2f}–{r['old_high']:.2f}) "
            f"| {r['share']:.3f} ({r['low']:.2f}–{r['high']:.2f}) | {covered} | {r['auc']:.3f} "
            f"| {r['separation']:.3f} | {r['ece']:.3f} | {r['suspected']:.1%} | {r['realized_fdr']:.3f} "
            f"| {r['estimated_fdr']:.3f} | {r['kept_mismatched']:.3f} ({r['estimated_kept']:.3f}) |"
        )
    print()
    print(aggregate(rows))


def aggregate(rows: dict[str, dict[str, float]]) -> str:
    """One line per collection and rate, over its seeds: the truth, the old and the new estimate
    (means), whether every interval held the truth, the largest error of the new estimate, the
    calibration error, the suspected pairs' precision and the realized against the estimated
    false-discovery rate at ``--fdr 0.1`` (means), the share suspected."""
    groups: dict[str, list[dict[str, float]]] = {}
    for name, r in rows.items():
        groups.setdefault(name.rsplit("_s", 1)[0], []).append(r)
    lines = [
        "| collection | seeds | truly mismatched | old estimate | new estimate | intervals hold the "
        "truth | largest error | AUC | ECE | suspected | truly mismatched among them | realized FDR "
        "| estimated FDR |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rs in groups.items():
        mean = {key: float(np.nanmean([r[key] for r in rs])) for key in rs[0] if key != "scores"}
        held = sum(r["low"] <= r["true"] <= r["high"] for r in rs)
        error = max(abs(r["share"] - r["true"]) for r in rs)
        precision = 1 - mean["realized_fdr"] if mean["suspected"] > 0 else float("nan")
        lines.append(
            f"| {name} | {len(rs)} | {mean['true']:.3f} | {mean['old']:.3f} | {mean['share']:.3f} "
            f"| {held} of {len(rs)} | {error:.3f} | {mean['auc']:.3f} | {mean['ece']:.3f} "
            f"| {mean['suspected']:.1%} | {precision:.2f} | {mean['realized_fdr']:.3f} "
            f"| {mean['estimated_fdr']:.3f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()

"""The same pairs, the same verdict? One collection audited in four forms, and over five seeds.

The collection: 400 of the Oxygen theme's 48×48 icons (Debian's ``oxygen-icon-theme``), captioned
by their names, a quarter of the captions swapped in cycles (none stays with its picture). It is
written as a folder (``images/`` + ``captions.csv``), a Parquet table of image bytes (no names,
the rows reversed), a Hugging Face ``Dataset`` saved to disk (the rows shuffled) and two
WebDataset shards (the rows shuffled otherwise). Each is audited with the default settings;
``pairs.csv``'s numbers are compared pair by pair, a pair known by its picture's digest and its
caption.

    python benchmarks/same_pairs.py forms          # the four forms, their pairs.csv compared
    python benchmarks/same_pairs.py seeds          # the folder at train.seed=0..4: the spread
    python benchmarks/same_pairs.py seeds --option division.repeats=9   # a variant's spread

Both stages print the tables of benchmarks/results/same_pairs.md: each form's numbers against the
folder's; each seed's share, suspects and AUC against the planted truth, and the suspects'
pairwise Jaccard overlap.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import itertools
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
WORK = Path("runs/same_pairs")
PAIRS, RATE, SEED = 400, 0.25, 0


def icons(n: int = PAIRS) -> list[tuple[Path, str]]:
    """``n`` of the Oxygen theme's 48×48 icons (Debian's ``oxygen-icon-theme``), one per name and
    per picture (a file linked under several names counted once), spread over the sorted names,
    each captioned by its name."""
    root = Path("/usr/share/icons/oxygen/base/48x48")
    by_name, seen = {}, set()
    for png in sorted(root.rglob("*.png")):
        digest = hashlib.blake2b(png.read_bytes(), digest_size=12).hexdigest()
        if png.stem not in by_name and digest not in seen:
            by_name[png.stem] = png
            seen.add(digest)
    names = sorted(by_name)
    picked = np.linspace(0, len(names) - 1, n).round().astype(int)
    return [(by_name[names[k]], " ".join(re.findall(r"[a-z0-9]+", names[k].lower()))) for k in picked]


def write_forms(root: Path) -> dict[str, Path]:
    """The collection as a folder, a Parquet table, a saved ``Dataset`` and shards (made once)."""
    from audit_calibration import write_collection

    folder = root / "folder"
    truth_file = root / "truth.json"
    if not truth_file.is_file():
        pairs = icons()
        truth = write_collection(folder, pairs, RATE, SEED)
        truth_file.write_text(json.dumps(truth.tolist()))
    import pandas as pd

    frame = pd.read_csv(folder / "captions.csv", dtype=str)
    blobs = [(folder / name).read_bytes() for name in frame["image"]]
    table = root / "table.parquet"
    if not table.is_file():
        rows = [{"image": {"bytes": b, "path": None}, "caption": c} for b, c in zip(blobs, frame["caption"])]
        pd.DataFrame(rows[::-1]).to_parquet(table, index=False)
    dataset = root / "dataset"
    if not dataset.is_dir():
        import datasets

        order = np.random.default_rng(1).permutation(len(frame))
        part = datasets.Dataset.from_dict(
            {
                "image": [{"bytes": blobs[k], "path": f"icon{k}.png"} for k in order],
                "text": [frame["caption"][k] for k in order],
            },
            features=datasets.Features({"image": datasets.Image(), "text": datasets.Value("string")}),
        )
        part.save_to_disk(str(dataset))
    shards = root / "shards"
    if not shards.is_dir():
        shards.mkdir()
        order = np.random.default_rng(2).permutation(len(frame))
        for s, chunk in enumerate(np.array_split(order, 2)):
            with tarfile.open(shards / f"{s:05d}.tar", "w") as tar:
                for k in chunk:
                    key = f"{s:02d}{int(k):05d}"
                    for suffix, blob in ((".png", blobs[k]), (".txt", frame["caption"][k].encode())):
                        info = tarfile.TarInfo(key + suffix)
                        info.size = len(blob)
                        tar.addfile(info, io.BytesIO(blob))
    return {"folder": folder, "table": table, "dataset": dataset, "shards": shards}


def audit(path: Path, out: Path, *options: str) -> float:
    """``mispair audit path --out out`` (made once); its seconds."""
    if (out / "summary.json").is_file():
        return float(json.loads((out / "summary.json").read_text())["timings"]["total"])
    started = time.time()
    argv = [sys.executable, "-m", "mispair.cli", "audit", str(path), "--out", str(out), "--quiet", *options]
    subprocess.run(argv, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return time.time() - started


def by_content(out: Path):
    """An audit's ``pairs.csv`` indexed by content: its ``image_digest`` (the picture's bytes)
    and caption."""
    import pandas as pd

    pairs = pd.read_csv(out / "pairs.csv", dtype={"pair_id": str, "image_id": str, "caption": str})
    return pairs.set_index(["image_digest", "caption"]).sort_index()


def numbers(pairs) -> list[str]:
    """The numbers of ``pairs.csv`` compared (:func:`mispair.audit.pair_table.verdict_columns`)."""
    from mispair.audit.pair_table import verdict_columns

    return verdict_columns(list(pairs.columns))


def truth_by_content(folder: Path) -> dict[tuple[str, str], bool]:
    """Each pair's truth (True: swapped), by the picture's digest as ``pairs.csv`` gives it."""
    import pandas as pd

    from mispair.data.features import content_digest

    frame = pd.read_csv(folder / "captions.csv", dtype=str)
    truth = json.loads((folder.parent / "truth.json").read_text())
    return {
        (content_digest(folder / n), c): bool(t) for n, c, t in zip(frame["image"], frame["caption"], truth)
    }


def headline(out: Path) -> tuple[float, int]:
    summary = json.loads((out / "summary.json").read_text())
    return float(summary["estimated_mismatched_share"]), int(summary["suspected"])


def forms(args: argparse.Namespace) -> None:
    paths = write_forms(args.work)
    seconds = {name: audit(path, args.work / f"audit-{name}", *args.option) for name, path in paths.items()}
    found = {name: by_content(args.work / f"audit-{name}") for name in paths}
    reference = found["folder"]
    columns = numbers(reference)
    print(f"{PAIRS} icons, {RATE:.0%} swapped; pairs.csv by (picture digest, caption), against the folder\n")
    print(
        "| form | share | suspects | pairs matched | probabilities differing | largest difference | "
        "suspected differing | pairs with any number differing | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in paths:
        other, out = found[name], args.work / f"audit-{name}"
        common = reference.index.intersection(other.index)
        mine, theirs = reference.loc[common], other.loc[common]
        diff = (mine["mismatch_probability"] - theirs["mismatch_probability"]).abs()
        flips = int((mine["suspected"] != theirs["suspected"]).sum())
        anything = int(
            ((mine[columns] != theirs[columns]) & ~(mine[columns].isna() & theirs[columns].isna()))
            .any(axis=1)
            .sum()
        )
        share, suspects = headline(out)
        print(
            f"| {name} | {share:.3f} | {suspects} | {len(common)} of {len(reference)} | "
            f"{int((diff > 0).sum())} | {diff.max():.3g} | {flips} | {anything} | {seconds[name]:.0f} |"
        )


def seeds(args: argparse.Namespace) -> None:
    from sklearn.metrics import roc_auc_score

    paths = write_forms(args.work)
    truth = truth_by_content(paths["folder"])
    suspects, rows = {}, []
    for seed in args.seeds:
        out = args.work / "-".join([f"seed-{seed}", *args.option])
        seconds = audit(paths["folder"], out, f"train.seed={seed}", *args.option)
        found = by_content(out)
        keys = list(found.index)
        auc = roc_auc_score([truth[k] for k in keys], found["mismatch_probability"])
        suspects[seed] = set(found.index[found["suspected"]])
        caught = sum(truth[k] for k in suspects[seed])
        share, count = headline(out)
        rows.append((seed, share, count, caught, auc, seconds))
    shares = np.array([r[1] for r in rows])
    options = f" with {' '.join(args.option)}" if args.option else ""
    mismatched = sum(truth.values())
    print(f"{PAIRS} icons, {RATE:.0%} swapped ({mismatched} mismatched); the folder at each seed{options}\n")
    print("| seed | share | suspects | of them mismatched | AUC (probability vs truth) | seconds |")
    print("|---|---|---|---|---|---|")
    for seed, share, count, caught, auc, seconds in rows:
        print(f"| {seed} | {share:.3f} | {count} | {caught} | {auc:.3f} | {seconds:.0f} |")
    jaccard = [
        len(suspects[a] & suspects[b]) / max(len(suspects[a] | suspects[b]), 1)
        for a, b in itertools.combinations(args.seeds, 2)
    ]
    every = set.intersection(*suspects.values())
    spread = np.abs(shares - shares.mean()).max()
    print(
        f"\nshare: mean {shares.mean():.3f}, largest distance from it {spread:.3f}; "
        f"suspects' Jaccard overlap over the {len(jaccard)} pairs of seeds: mean {np.mean(jaccard):.2f}, "
        f"min {min(jaccard):.2f}, max {max(jaccard):.2f}; suspected at every seed: {len(every)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["forms", "seeds"])
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--option", action="append", default=[], help="an audit option or override (repeatable)"
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    {"forms": forms, "seeds": seeds}[args.stage](args)


if __name__ == "__main__":
    main()

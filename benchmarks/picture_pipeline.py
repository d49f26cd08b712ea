"""Pictures a second of the audit's picture pipeline on this machine's cores, two source trees
side by side (issue 66.2): what a change of the pipeline does, everything else equal.

Each run is a child process that imports mispair from one tree (``PYTHONPATH=TREE/src``) and
runs :func:`~mispair.data.picture_features.extract_folder_features` as the audit does (the
default encoder, ``data.encoder_runtime=auto``, the mean feature stored) over the first
``--pictures`` files under ``--folder`` (sorted paths) into an empty cache folder of its own: content
keys, decoding and fitting to 224 × 224, the encoder, the store. ONNX Runtime's export is made
once beforehand in a shared model cache, so no run pays it. The trees alternate, the order
reversed every other round; each row is the median of ``--rounds`` rounds, with every round's
rate, the load average at each start, and whether both trees' features are equal to the bit.

    python benchmarks/picture_pipeline.py --folder runs/real_pictures/n20000/collection/images \\
        --tree before=/tmp/wt_before --tree after=. --pictures 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CHILD = """
import json, sys, time
import numpy as np
from pathlib import Path
from mispair.data.picture_features import extract_folder_features
folder, count, cache, out = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())[:count]
start = time.perf_counter()
found = extract_folder_features(folder, names, cache_dir=cache, runtime="auto", form="mean", progress=False)
seconds = time.perf_counter() - start
np.save(out, found.features)
print(json.dumps({"seconds": seconds, "pictures": len(names)}))
"""


def run_once(tree: Path, folder: Path, pictures: int, models: Path, work: Path, label: str) -> dict:
    """One child process of ``tree`` over the pictures, into a new cache; its seconds and load."""
    cache = work / f"cache-{label}"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(mode=0o700)
    if any(models.iterdir()):  # the exported model, copied: no run pays the export
        shutil.copytree(models, cache / "onnx")
    env = {
        **os.environ,
        "PYTHONPATH": str(tree / "src"),
        "MISPAIR_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": str(os.cpu_count() or 1),
    }
    load = os.getloadavg()[0]
    out = work / f"features-{label}.npy"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), str(pictures), str(cache), str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"{label}: the child failed:\n{done.stderr[-2000:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {"seconds": found["seconds"], "rate": found["pictures"] / found["seconds"], "load": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True, help="a folder of pictures")
    parser.add_argument("--tree", action="append", required=True, help="LABEL=PATH of a source tree (2+)")
    parser.add_argument("--pictures", type=int, default=2000, help="pictures of each run (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each row is their median")
    parser.add_argument("--write", type=Path, help="append the section (markdown) here")
    args = parser.parse_args()
    trees = dict(item.split("=", 1) for item in args.tree)
    with tempfile.TemporaryDirectory(prefix="picture_pipeline-") as scratch:
        work = Path(scratch)
        models = work / "models"
        models.mkdir(mode=0o700)
        first = next(iter(trees.values()))
        warm = run_once(Path(first), args.folder, 64, models, work, "warm-up")  # exports the model
        for exported in (work / "cache-warm-up" / "onnx").glob("*.onnx"):
            shutil.copy2(exported, models / exported.name)
        print(f"warm-up (the export): {warm['seconds']:.1f} s", flush=True)
        runs: dict[str, list[dict]] = {label: [] for label in trees}
        equal = True
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for label in order:
                found = run_once(Path(trees[label]), args.folder, args.pictures, models, work, label)
                runs[label].append(found)
                print(
                    f"round {r + 1} {label}: {found['rate']:.1f} pictures/s (load {found['load']:.2f})",
                    flush=True,
                )
            arrays = [np.load(work / f"features-{label}.npy") for label in trees]
            equal = equal and all(a.tobytes() == arrays[0].tobytes() for a in arrays[1:])
    print(section(args, trees, runs, equal))
    if args.write:
        with args.write.open("a", encoding="utf-8") as handle:
            handle.write(section(args, trees, runs, equal) + "\n")


def section(args: argparse.Namespace, trees: dict[str, str], runs: dict[str, list[dict]], equal: bool) -> str:
    base = statistics.median(r["rate"] for r in runs[next(iter(trees))])
    lines = [
        f"`python benchmarks/picture_pipeline.py --folder {args.folder} "
        + " ".join(f"--tree {k}={v}" for k, v in trees.items())
        + f" --pictures {args.pictures} --rounds {args.rounds}`; {os.cpu_count()} cores, "
        f"OMP_NUM_THREADS={os.cpu_count()}; features equal to the bit across trees: "
        + ("yes." if equal else "NO."),
        "",
        "| tree | pictures/s (median) | each round | × the first tree | load at each start |",
        "|---|---:|---|---:|---|",
    ]
    for label, found in runs.items():
        rate = statistics.median(r["rate"] for r in found)
        rounds = ", ".join(f"{r['rate']:.1f}" for r in found)
        loads = ", ".join(f"{r['load']:.2f}" for r in found)
        lines.append(f"| {label} | **{rate:.1f}** | {rounds} | {rate / base:.2f}× | {loads} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()

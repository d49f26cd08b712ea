"""What checking the cache costs (issue 58.1): the pictures' keys with a digest of their bytes,
and feature chunks read through the checked loader, against the unchecked ways they replaced.

1. Keys of ``--pictures`` picture files (``--kbytes`` each on average, written once into
   ``--work``): the old key (resolved path, size, mtime: ``stat`` only) against
   :func:`mispair.data.features.file_keys` (the same plus SHA-256 of the bytes, four threads).
2. The feature chunks of ``--pictures`` pictures (EfficientNet-Lite0's ``[49, 1280]`` float16
   each, in chunks of 64) read back: ``np.load`` of plain ``.npz`` files (the old cache, after
   ``check_npz``) against :func:`mispair.data.cache_files.read_arrays` (regular file, bounded,
   HMAC-SHA-256 of name and content, finite values).

Each timing is the median of ``--repeats`` runs with the page cache warm (the files were just
written or read), so it is the CPU's cost, not the disk's. Run::

    OMP_NUM_THREADS=2 PYTHONPATH=src python benchmarks/bench_cache_trust.py --pictures 20000 \\
        --write benchmarks/results/bench_cache_trust.md
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np


def timed(run, repeats: int) -> float:
    """The median wall time of ``run()`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def write_pictures(folder: Path, count: int, kbytes: int) -> list[Path]:
    """``count`` files of random bytes, sizes spread from half to 1.5 × ``kbytes`` KB (their
    content does not matter to hashing or ``stat``)."""
    folder.mkdir(parents=True, exist_ok=True)
    blob = os.urandom(2 * kbytes * 1024)
    paths = []
    for i in range(count):
        path = folder / f"{i:06d}.png"
        size = kbytes * 1024 // 2 + (i * 7919) % (kbytes * 1024)
        path.write_bytes(blob[:size] + i.to_bytes(4, "little"))
        paths.append(path)
    return paths


def old_key(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


def key_times(paths: list[Path], repeats: int) -> tuple[float, float]:
    from mispair.data.features import file_keys

    return timed(lambda: [old_key(p) for p in paths], repeats), timed(lambda: file_keys(paths), repeats)


def chunk_times(folder: Path, pictures: int, repeats: int) -> tuple[float, float]:
    from mispair.data.cache_files import read_arrays, write_arrays
    from mispair.safe_parse import check_npz

    rng = np.random.default_rng(0)
    block = rng.normal(size=(64, 49, 1280)).astype(np.float16)
    old, new = folder / "old", folder / "new"
    old.mkdir(parents=True, exist_ok=True)
    new.mkdir(parents=True, exist_ok=True)
    chunks = range((pictures + 63) // 64)
    for k in chunks:
        arrays = {"features": block, "valid": np.ones(64, dtype=bool)}
        np.savez(old / f"{k}.npz", **arrays)
        write_arrays(new / f"{k}.chunk", arrays)

    def read_old() -> None:
        for k in chunks:
            check_npz(old / f"{k}.npz")
            with np.load(old / f"{k}.npz", allow_pickle=False) as data:
                data["features"], data["valid"]

    def read_new() -> None:
        for k in chunks:
            read_arrays(new / f"{k}.chunk")

    return timed(read_old, repeats), timed(read_new, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pictures", type=int, default=20_000)
    parser.add_argument("--kbytes", type=int, default=45, help="average picture file size, KB")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--work", type=Path, default=None, help="where the files go (default: a temporary folder)"
    )
    parser.add_argument("--write", type=Path, default=None, help="append the section to this markdown file")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-cache-trust-"))
    os.environ.setdefault("MISPAIR_CACHE", str(work / "cache"))
    try:
        paths = write_pictures(work / "pictures", args.pictures, args.kbytes)
        megabytes = sum(p.stat().st_size for p in paths) / 1e6
        old_keys, new_keys = key_times(paths, args.repeats)
        old_read, new_read = chunk_times(work / "chunks", args.pictures, args.repeats)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    gigabytes = args.pictures * 49 * 1280 * 2 / 1e9
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    text = (
        f"\n## {args.pictures:,} pictures ({when}, load average {load:.1f}, {os.cpu_count()} CPUs)\n\n"
        f"| what | unchecked (before) | checked (after) | added |\n|---|---|---|---|\n"
        f"| keys of {args.pictures:,} pictures ({megabytes:,.0f} MB) | {old_keys:.2f} s | {new_keys:.2f} s "
        f"| {new_keys - old_keys:+.2f} s |\n"
        f"| feature chunks of {args.pictures:,} pictures ({gigabytes:.2f} GB) | {old_read:.2f} s | "
        f"{new_read:.2f} s | {new_read - old_read:+.2f} s |\n\n"
        f"Median of {args.repeats} runs each, page cache warm: "
        f"`python benchmarks/bench_cache_trust.py --pictures {args.pictures} --kbytes {args.kbytes}`.\n"
    )
    print(text)
    if args.write:
        with open(args.write, "a", encoding="utf-8") as handle:
            handle.write(text)


if __name__ == "__main__":
    main()

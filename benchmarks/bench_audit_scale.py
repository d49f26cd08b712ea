"""The audit at scale: wall time, peak memory, detection AUC and where the time goes, per size.

For each size (``--sizes``, pairs; default 10,000 100,000 1,000,000, only the sizes asked are
run) a synthetic precomputed collection is written (the ``precomp`` format: ``{split}_ims.npy``
region features ``--regions`` × ``--dim`` float32, ``{split}_caps.txt`` with 5 captions per image,
``train_natural_noise.npy``): images fall into ``--clusters`` clusters, each with a prototype
that its images' regions render with noise, and their captions draw words from the cluster's few
words of a small vocabulary, so captions relate to image clusters. ``--noise`` of the training
captions are swapped among themselves and the truth is kept as the collection's noise record, so
the audit's detection AUC is scored against it (``summary.json`` ``detection``).

``mispair audit`` runs on each size in its own process (``python -m mispair audit``, with the
``PYTHONPATH`` of this process: ``PYTHONPATH=/other/checkout/src`` measures another tree); its
wall time and peak RSS (``os.wait4``'s ``ru_maxrss`` of the child: every resident page, those of
memory-mapped files included) are measured, with the peak of its anonymous memory (``RssAnon``,
what the process itself holds, sampled from ``/proc`` every quarter second), and the time per
part is read from ``summary.json`` ``timings`` (reading/features, division, training, ranking,
map, report; "–" for a tree that does not write them). The fitted growth exponent is the slope of
log(wall time) and log(peak RSS) against log(pairs), least squares over the sizes.

``--short`` cuts the audit's schedule for quick checks (:data:`SHORT`); further ``key=value``
overrides are passed through (``train.epochs=2 division.rounds=1``). Each run uses its own text
cache (``data.cache_dir``), so the text encoder's features are part of every measurement, unless
``--text-cache`` names the folder of an earlier run (then they are not: say so with the figures).

Run (the figures in ``benchmarks/results/bench_audit_scale.md``)::

    OMP_NUM_THREADS=2 PYTHONPATH=src python benchmarks/bench_audit_scale.py --sizes 5000 10000 20000 \\
        --short --label after --write benchmarks/results/bench_audit_scale.md

(``PYTHONPATH=/path/to/other/checkout/src`` for the "before" sections).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

SHORT = [
    "train.epochs=1",
    "train.lr_decay_epochs=[]",
    "division.folds=2",
    "division.rounds=1",
    "division.repeats=1",
    "division.epochs=1",
]
"""The audit's schedule cut for a quick check: one epoch, two scorers of one epoch each."""

PARTS = ("reading", "division", "training", "ranking", "join_errors", "map", "report")
CAPTIONS_PER_IMAGE = 5
WORDS_PER_CLUSTER = 4
FILLERS = ("a", "the", "with", "and", "near", "of", "some", "two", "in", "on")


@dataclass
class Measurement:
    """One audit of one size: ``pairs``, ``images``, ``wall`` seconds, ``rss_mb`` peak resident
    memory of the audit's process, ``anon_mb`` its sampled peak anonymous memory (None: not on
    Linux), ``auc`` (None: not scored), ``parts`` seconds per part, ``largest`` the sample of the
    largest RSS seen (its moment and its anonymous and file-backed parts)."""

    pairs: int
    images: int
    wall: float
    rss_mb: float
    anon_mb: float | None
    auc: float | None
    parts: dict[str, float]
    largest: Sample | None = None
    high_water: tuple[float, float] | None = None


def split_sizes(n_images: int) -> dict[str, int]:
    """Images per split: 5% test and 5% dev (at least 2 each), the rest train."""
    held = max(2, n_images // 20)
    return {"train": n_images - 2 * held, "dev": held, "test": held}


def write_collection(root: Path, pairs: int, args: argparse.Namespace) -> None:
    """A synthetic precomputed collection of ``pairs`` pairs in ``root`` (module docstring)."""
    root.mkdir(parents=True, exist_ok=True)
    world = np.random.default_rng(1234)
    prototypes = world.normal(size=(args.clusters, args.dim)).astype(np.float32)
    vocabulary = [f"w{k}" for k in range(args.clusters * WORDS_PER_CLUSTER)]
    rng = np.random.default_rng(args.seed)
    for split, n_images in split_sizes(max(1, pairs // CAPTIONS_PER_IMAGE)).items():
        cluster = rng.integers(0, args.clusters, size=n_images)
        features = np.lib.format.open_memmap(
            root / f"{split}_ims.npy", mode="w+", dtype=np.float32, shape=(n_images, args.regions, args.dim)
        )
        for start in range(0, n_images, 512):  # written a block at a time: never the whole array
            part = cluster[start : start + 512]
            noise = rng.normal(size=(len(part), args.regions, args.dim)).astype(np.float32)
            features[start : start + len(part)] = prototypes[part, None, :] + 1.5 * noise
        features.flush()
        del features
        captions = [caption(c, vocabulary, rng) for c in np.repeat(cluster, CAPTIONS_PER_IMAGE)]
        if split == "train":
            captions, noisy = swap_captions(captions, args.noise, rng)
            np.save(root / "train_natural_noise.npy", noisy)
        (root / f"{split}_caps.txt").write_text("".join(c + "\n" for c in captions), encoding="utf-8")


def caption(cluster: int, vocabulary: list[str], rng: np.random.Generator) -> str:
    """Three of the cluster's words and two fillers, shuffled."""
    own = vocabulary[cluster * WORDS_PER_CLUSTER : (cluster + 1) * WORDS_PER_CLUSTER]
    words = list(rng.choice(own, size=3, replace=False)) + list(rng.choice(FILLERS, size=2))
    rng.shuffle(words)
    return " ".join(words)


def swap_captions(
    captions: list[str], share: float, rng: np.random.Generator
) -> tuple[list[str], np.ndarray]:
    """``captions`` with ``share`` of them moved one place round a random cycle, and ``[n]`` bool
    True where a caption is no longer its image's (identical texts swapped count as clean)."""
    chosen = rng.choice(len(captions), size=round(share * len(captions)), replace=False)
    swapped = list(captions)
    for source, target in zip(chosen, np.roll(chosen, 1)):
        swapped[target] = captions[source]
    noisy = np.array([a != b for a, b in zip(swapped, captions)], dtype=bool)
    return swapped, noisy


def run_audit(data: Path, out: Path, overrides: list[str]) -> tuple[float, float, MemorySampler]:
    """``mispair audit data --out out overrides`` in a child process: (wall seconds, peak RSS MiB,
    the sampler of its memory)."""
    command = [sys.executable, "-m", "mispair", "audit", str(data), "--out", str(out), "--quiet", *overrides]
    began = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    sampler = MemorySampler(child.pid)
    sampler.start()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    sampler.join()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"audit of {data} failed (exit {child.returncode}): {' '.join(command)}")
    return wall, usage.ru_maxrss / 1024, sampler  # Linux: kilobytes


@dataclass
class Sample:
    """One reading of the audit's memory (MiB) at ``seconds`` after its start: ``rss`` (VmRSS),
    ``anon`` (RssAnon) and ``file`` (RssFile: pages of mapped files and libraries)."""

    seconds: float
    rss: float
    anon: float
    file: float


class MemorySampler(threading.Thread):
    """Reads the memory of process ``pid`` every quarter second until it ends: ``peak_mb`` the
    largest anonymous memory seen, ``largest`` the :class:`Sample` of the largest RSS seen (None
    where ``/proc`` has none), and ``high_water`` (seconds after the start, MiB) of the first
    reading at which the kernel's high-water mark of RSS (``VmHWM``, what ``ru_maxrss`` reports)
    had reached its last value: the peak came within the quarter second before, even when no
    reading saw it."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.status, self.peak_mb, self.largest = Path(f"/proc/{pid}/status"), None, None
        self.high_water: tuple[float, float] | None = None
        self.began = time.perf_counter()

    def run(self) -> None:
        while True:
            try:
                text = self.status.read_text()
            except OSError:  # the process is gone
                return
            keys = ("VmRSS", "RssAnon", "RssFile", "VmHWM")
            found = {key: re.search(rf"^{key}:\s+(\d+) kB", text, re.MULTILINE) for key in keys}
            if any(match is None for match in found.values()):
                return  # not Linux, or a zombie
            rss, anon, file, hwm = (int(found[key].group(1)) / 1024 for key in keys)
            if self.high_water is None or hwm > self.high_water[1]:
                self.high_water = (time.perf_counter() - self.began, hwm)
            self.peak_mb = max(self.peak_mb or 0.0, anon)
            if self.largest is None or rss > self.largest.rss:
                self.largest = Sample(time.perf_counter() - self.began, rss, anon, file)
            time.sleep(0.25)


def measure(pairs: int, args: argparse.Namespace, overrides: list[str]) -> Measurement:
    """Write the collection of ``pairs`` pairs (kept between runs) and audit it into a new folder."""
    work = Path(args.work) / f"n{pairs}-r{args.regions}-d{args.dim}"
    data = work / "data"
    if not (data / "test_caps.txt").is_file():
        write_collection(data, pairs, args)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", args.label).strip("-") or "run"  # a label may hold spaces
    out = work / f"audit-{slug}-{time.strftime('%H%M%S')}"
    cache = args.text_cache or f"{out}-cache"
    wall, rss, sampler = run_audit(data, out, [*overrides, f"data.cache_dir={cache}"])
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    detection = summary.get("detection") or {}
    return Measurement(
        pairs=int(summary["pairs"]),
        images=int(summary["images"]),
        wall=wall,
        rss_mb=rss,
        anon_mb=sampler.peak_mb,
        auc=detection.get("auc"),
        parts=summary.get("timings", {}),
        largest=sampler.largest,
        high_water=sampler.high_water,
    )


def growth(sizes: list[int], values: list[float]) -> float | None:
    """The slope of log(value) against log(size), least squares (None with fewer than 2 sizes)."""
    if len(set(sizes)) < 2:
        return None
    return float(np.polyfit(np.log(sizes), np.log(values), 1)[0])


def table(rows: list[Measurement]) -> str:
    """The measurements as a markdown table, then the growth exponents."""
    head = ["pairs", "images", "wall s", "ms/pair", "peak RSS MiB", "peak anon MiB", "AUC"]
    head += [f"{p} s" for p in PARTS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in rows:
        parts = [f"{m.parts[p]:.1f}" if p in m.parts else "–" for p in PARTS]
        auc = "–" if m.auc is None else f"{m.auc:.3f}"
        cells = [f"{m.pairs:,}", f"{m.images:,}", f"{m.wall:.1f}", f"{1000 * m.wall / m.pairs:.1f}"]
        anon = "–" if m.anon_mb is None else f"{m.anon_mb:.0f}"
        lines.append("| " + " | ".join([*cells, f"{m.rss_mb:.0f}", anon, auc, *parts]) + " |")
    for m in rows:
        if m.largest is not None:
            at = m.largest
            lines.append(
                f"\n{m.pairs:,} pairs: the largest RSS sampled (every 0.25 s), {at.rss:.0f} MiB, came "
                f"{at.seconds:.0f} s after the start: {at.anon:.0f} MiB anonymous, {at.file:.0f} MiB of "
                "mapped files and libraries"
            )
        if m.high_water is not None:
            seconds, mib = m.high_water
            lines.append(
                f"\n{m.pairs:,} pairs: the kernel's high-water mark of RSS (VmHWM) reached {mib:.0f} MiB "
                f"within the 0.25 s before {seconds:.1f} s after the start"
            )
    sizes = [m.pairs for m in rows]
    for what, values in (("wall time", [m.wall for m in rows]), ("peak RSS", [m.rss_mb for m in rows])):
        slope = growth(sizes, values)
        if slope is not None:
            lines.append(f"\ngrowth exponent of {what} (log-log least squares over the sizes): {slope:.2f}")
    return "\n".join(lines)


def section(args: argparse.Namespace, overrides: list[str], rows: list[Measurement]) -> str:
    """A markdown section of the results file: label, command, machine, table."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    source = os.environ.get("PYTHONPATH", "(installed mispair)")
    return (
        f"## {args.label}\n\n"
        f"{when}; mispair from `{source}`; features {args.regions} × {args.dim} float32, "
        f"{args.clusters} clusters, {args.noise:.0%} of the training captions swapped; "
        f"overrides `{' '.join(overrides) or 'none'}`; "
        f"{os.cpu_count()} CPU cores **shared with other work** (timings are indicative), "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}."
        + (
            f" The captions' text states were read from `{args.text_cache}`, filled by an earlier "
            "run: the text encoder is not in these times."
            if args.text_cache
            else ""
        )
        + f"\n\n{table(rows)}\n"
    )


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the audit's run")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--regions", type=int, default=36, help="region features per image")
    parser.add_argument("--dim", type=int, default=2048, help="length of a region feature")
    parser.add_argument("--clusters", type=int, default=50, help="image clusters (caption topics)")
    parser.add_argument("--noise", type=float, default=0.2, help="share of training captions swapped")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--short", action="store_true", help="the short schedule (SHORT) for quick checks")
    parser.add_argument("--work", default="/tmp/bench_audit_scale", help="collections and audits go here")
    parser.add_argument("--label", default="run", help="the section title in --write")
    parser.add_argument(
        "--text-cache",
        help="a text cache folder an earlier audit of the same collection filled (default: a new one "
        "per run): the captions are not encoded again, so the time excludes the text encoder",
    )
    parser.add_argument("--write", help="append the section to this markdown file")
    args = parser.parse_args(argv)
    return args, [*(SHORT if args.short else []), *args.overrides]


def main(argv: list[str] | None = None) -> None:
    args, overrides = parse_args(argv)
    rows = []
    for pairs in args.sizes:
        rows.append(measure(pairs, args, overrides))
        print(f"{pairs:,} pairs: {rows[-1].wall:.1f} s, {rows[-1].rss_mb:.0f} MiB", flush=True)
    text = section(args, overrides, rows)
    print(text)
    if args.write:
        with open(args.write, "a", encoding="utf-8") as handle:
            handle.write("\n" + text)


if __name__ == "__main__":
    main()

"""How fast the command line answers: ``--help``, a refusal, one search, a hundred searches.

Each case runs ``python -m mispair ...`` in a fresh process (what a user waits for: the
interpreter, the imports, the work) ``--runs`` times and prints the median and the spread of the
wall times. The searches use an index the benchmark builds itself: a synthetic precomputed
collection (``--images`` test images, 5 captions each), a one-epoch cosine run trained on it, and
an exact index of its test split; the queries are the first 100 test captions.

Cases: ``--help``; ``audit --help``; ``audit /no/such/path --out ...`` and
``search /no/such/index battery`` (refused before heavy work); one query; 100 queries in one
batched run (``--queries FILE``); beside it, what 100 single-query runs would cost (100 × the
median of one). With ``--compare SRC`` (another checkout's ``src`` folder, e.g. the last commit's:
``git archive HEAD src | tar -x -C /tmp/before``) each case also runs with that tree, the two
alternating run by run so that both meet the same load; a case the other tree cannot run
(``--queries`` before it existed) is shown as ``-``.

Run::

    PYTHONPATH=src python benchmarks/bench_cli_start.py [--runs 5] [--compare /tmp/before/src]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
TINY = [
    "data.source=precomp",
    "model.embed_dim=16",
    "model.word_dim=8",
    "train.epochs=1",
    "train.batch_size=50",
    "train.threads=1",
]


def mispair(src: Path, *argv: str | Path, check: bool = False) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``python -m mispair ARGV`` with the package from ``src``; its wall time and result."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mispair", *map(str, argv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    seconds = time.perf_counter() - started
    if check and done.returncode != 0:
        raise SystemExit(f"mispair {' '.join(map(str, argv))} failed:\n{done.stderr}")
    return seconds, done


def build_index(work: Path, images: int) -> tuple[Path, list[str]]:
    """A synthetic collection, a tiny cosine run on it and an exact index of its test split."""
    from mispair.data.synthetic import write_synthetic_dataset

    root = write_synthetic_dataset(work / "syn_precomp", n_train=images, n_dev=images // 5, n_test=images)
    mispair(SRC, "train", *TINY, f"data.root={root}", "--out", work / "run", "--quiet", check=True)
    index = work / "syn.index"
    mispair(
        SRC, "index", work / "run" / "best.pt", root, "--out", index, "--split", "test", "--quiet", check=True
    )
    return index, (root / "test_caps.txt").read_text().splitlines()[:100]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each case (default 5)")
    parser.add_argument("--images", type=int, default=40, help="test images of the collection (default 40)")
    parser.add_argument("--compare", type=Path, help="another tree's src folder, timed side by side")
    args = parser.parse_args()
    trees = {"this tree": SRC}
    if args.compare:
        trees["--compare"] = args.compare.resolve()
    with tempfile.TemporaryDirectory(prefix="bench-cli-start-") as tmp:
        work = Path(tmp)
        index, queries = build_index(work, args.images)
        (work / "queries.txt").write_text("\n".join(queries) + "\n", encoding="utf-8")
        cases = {
            "mispair --help": ["--help"],
            "mispair audit --help": ["audit", "--help"],
            "audit /no/such/path (refused)": ["audit", "/no/such/path", "--out", work / "never"],
            "search /no/such/index (refused)": ["search", "/no/such/index", "battery"],
            "search INDEX QUERY (1 query)": ["search", index, queries[0]],
            "search INDEX --queries (100 queries, 1 run)": [
                "search",
                index,
                "--queries",
                work / "queries.txt",
            ],
        }
        print(f"# PYTHONPATH=src python benchmarks/bench_cli_start.py --runs {args.runs}", end="")
        print(f" --compare {args.compare}" if args.compare else "")
        print(f"# python {sys.version.split()[0]}, {os.cpu_count()} CPUs; an index of {args.images} images")
        print(f"# wall seconds of a fresh process: median (min-max) of {args.runs} runs")
        header = f"{'case':<46}" + "".join(f"{name:>22}" for name in trees)
        print(header)
        medians: dict[tuple[str, str], float] = {}
        for case, argv in cases.items():
            times: dict[str, list[float]] = {name: [] for name in trees}
            failed: set[str] = set()  # the trees that cannot run the case
            for _ in range(args.runs):
                for name, src in trees.items():
                    if name not in failed:
                        seconds, done = mispair(src, *argv)
                        times[name].append(seconds)
                        if done.returncode != (2 if "refused" in case else 0):
                            failed.add(name)
            row = f"{case:<46}"
            for name in trees:
                if name not in failed:
                    medians[case, name] = statistics.median(times[name])
                    cell = f"{medians[case, name]:.2f} ({min(times[name]):.2f}-{max(times[name]):.2f})"
                else:
                    cell = "-"
                row += f"{cell:>22}"
            print(row, flush=True)
        one, many = "search INDEX QUERY (1 query)", "search INDEX --queries (100 queries, 1 run)"
        row = f"{'100 queries as 100 runs (100 × 1 query)':<46}"
        for name in trees:
            cell = f"{100 * medians[one, name]:.1f}" if (one, name) in medians else "-"
            row += f"{cell:>22}"
        print(row)
        if (many, "this tree") in medians:
            ratio = 100 * medians[one, "this tree"] / medians[many, "this tree"]
            print(f"100 queries in one run: {ratio:.0f}× faster than 100 runs of one (this tree)")


if __name__ == "__main__":
    main()

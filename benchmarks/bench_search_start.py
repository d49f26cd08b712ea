"""How long a cold ``mispair search`` and a ``mispair serve`` start take, with the index's own
query encoder (ONNX, :mod:`mispair.search.query_encoder`) and with the checkpoint's models.

The benchmark builds what it times: a synthetic precomputed collection (``--images`` test
images, 5 captions each), a one-epoch cosine run on the frozen MiniLM (the default text encoder,
float32) and an exact index of its test split. Each case runs in a fresh process ``--runs``
times (after one run not counted) and prints the median and the spread of the wall times:

- ``search INDEX QUERY``: the index encodes the query itself (no torch, no transformers);
- ``search INDEX QUERY --checkpoint CKPT``: the checkpoint's models encode it (what every search
  did before the index held an encoder; a given checkpoint still takes this path);
- ``serve INDEX``: from the start of the process to its first answer of ``GET /health``;
- ``serve INDEX --checkpoint CKPT``: the same through the checkpoint.

It also checks that both searches print the same hits (scores within 1e-5). ``--text-precision
bfloat16`` (or ``auto``, what ``mispair train PATH`` takes: bfloat16 on a CPU with native
bfloat16) trains the run with MiniLM in bfloat16, whose index holds a float32 encoder checked
within a bfloat16 tolerance: the hits may then swap near ties, which it reports instead.

Run::

    PYTHONPATH=src python benchmarks/bench_search_start.py [--runs 5] [--images 40] [--text-precision auto]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
TINY = [
    "data.source=precomp",
    "model.embed_dim=16",
    "train.epochs=1",
    "train.batch_size=50",
    "train.threads=1",
]
ENV = {**os.environ, "PYTHONPATH": str(SRC)}


def mispair(*argv: object) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "mispair", *map(str, argv)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=900,
    )
    if done.returncode != 0:
        raise SystemExit(f"mispair {' '.join(map(str, argv))} failed:\n{done.stderr}")
    return done


def build(work: Path, images: int, precision: str) -> tuple[Path, Path]:
    """The collection, the MiniLM run and its index."""
    from mispair.data.synthetic import write_synthetic_dataset

    root = write_synthetic_dataset(work / "syn", n_train=images, n_dev=images // 5, n_test=images)
    mispair(
        "train",
        *TINY,
        f"data.root={root}",
        "model.text_encoder=minilm",
        f"model.text_precision={precision}",
        "--out",
        work / "run",
        "--quiet",
    )
    checkpoint, index = work / "run" / "best.pt", work / "syn.index"
    mispair("index", checkpoint, root, "--split", "test", "--out", index, "--quiet")
    return index, checkpoint


def search_seconds(*argv: object) -> float:
    started = time.perf_counter()
    mispair("search", *argv)
    return time.perf_counter() - started


def serve_seconds(*argv: object) -> float:
    """From the start of ``mispair serve ARGV --port 0`` to its first answer of /health."""
    started = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "mispair", "serve", *map(str, argv), "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert server.stderr is not None
        first = server.stderr.readline()
        url = first.split(" at ")[1].split()[0]
        with urllib.request.urlopen(f"{url}/health", timeout=60) as answer:
            assert json.loads(answer.read())["status"] == "ok"
        return time.perf_counter() - started
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(60)


def timed(measure, runs: int) -> str:
    measure()  # not counted: the files in the page cache, as for a user's second command
    seconds = [measure() for _ in range(runs)]
    return f"{statistics.median(seconds):.2f} ({min(seconds):.2f}-{max(seconds):.2f})"


def same_hits(index: Path, checkpoint: Path, query: str, exact: bool) -> float:
    """The largest score difference of the two paths' hits (when ``exact``, a SystemExit when the
    hits differ; else it says so)."""
    fast = json.loads(mispair("search", index, query, "--json", "--top-k", "10").stdout)["hits"]
    slow = json.loads(
        mispair("search", index, query, "--json", "--top-k", "10", "--checkpoint", checkpoint).stdout
    )
    slow = slow["hits"]
    if [h["image"] for h in fast] != [h["image"] for h in slow]:
        if exact:
            raise SystemExit("the two paths found different hits")
        print("# the two paths order the hits differently (near ties)")
    return max(abs(a["score"] - b["score"]) for a, b in zip(fast, slow))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--images", type=int, default=40)
    parser.add_argument("--text-precision", choices=("float32", "bfloat16", "auto"), default="float32")
    args = parser.parse_args()
    query = "a red apple on a table"
    with tempfile.TemporaryDirectory() as folder:
        index, checkpoint = build(Path(folder), args.images, args.text_precision)
        entry = json.loads((index / "manifest.json").read_text()).get("query_encoder")
        precision = (entry or {}).get("run_precision", "float32")
        gap = same_hits(index, checkpoint, query, exact=precision == "float32")
        size = sum(p.stat().st_size for p in index.iterdir()) / 1e6
        rows = [
            ("search INDEX QUERY (the index's encoder)", lambda: search_seconds(index, query)),
            (
                "search INDEX QUERY --checkpoint (the models)",
                lambda: search_seconds(index, query, "--checkpoint", checkpoint),
            ),
            ("serve INDEX: start to first answer", lambda: serve_seconds(index)),
            (
                "serve INDEX --checkpoint: start to first answer",
                lambda: serve_seconds(index, "--checkpoint", checkpoint),
            ),
        ]
        python = sys.version.split()[0]
        print(f"# python {python}, {os.cpu_count()} CPUs; an index of {args.images} images ({size:.0f} MB)")
        print(f"# the run's MiniLM in {precision}; the index's query encoder: {entry}")
        print(f"# wall seconds of a fresh process: median (min-max) of {args.runs} runs")
        for name, measure in rows:
            print(f"{name:<52} {timed(measure, args.runs)}")
        print(f"largest score difference of the two paths' hits {gap:.1e}")


if __name__ == "__main__":
    main()

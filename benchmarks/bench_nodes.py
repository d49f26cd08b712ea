"""``mispair audit`` in one process against two torchrun "nodes" on this machine.

A synthetic precomputed collection (``--images`` training images, 5 captions each, a fifth of
the dev and test sizes) is audited twice with the same options: once in one process, once by two
torchrun agents joined at a c10d rendezvous on 127.0.0.1 (``--nnodes 2 --nproc_per_node 1``,
the commands ``docs/scale.md`` gives for two machines, with the loopback address), one after the
other. Prints each wall time (the processes' start included) and the largest difference of the
held-out scores and mismatch probabilities between the two ``pairs.csv``.

With ``--kill-after S``, a third audit: the two nodes again into a new folder, node 1's agent and
worker killed ``S`` seconds in (``SIGKILL``), then both commands run again: the time of the
second launch, and its ``pairs.csv`` against one process's.

Run::

    PYTHONPATH=src python benchmarks/bench_nodes.py [--images 400] [--folder DIR] [--kill-after 60]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

OPTIONS = [
    "model.text_encoder=bigru",
    "model.image_pooling=fragments",
    "model.embed_dim=64",
    "model.word_dim=32",
    "train.epochs=4",
    "train.batch_size=32",
    "train.lr_decay_epochs=[]",
    "train.threads=1",
    "division.folds=4",
    "division.epochs=6",
    "division.rounds=1",
    "division.repeats=1",
]


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=400)
    parser.add_argument("--folder", type=Path, default=None)
    parser.add_argument("--kill-after", type=float, default=None)
    args = parser.parse_args()
    import numpy as np
    import pandas as pd

    from mispair.data.synthetic import write_synthetic_dataset

    folder = args.folder or Path(tempfile.mkdtemp(prefix="nodes-bench-"))
    dev = max(20, args.images // 5)
    collection = write_synthetic_dataset(folder / "toy_precomp", n_train=args.images, n_dev=dev, n_test=dev)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    audit = ["-m", "mispair", "audit", str(collection), *OPTIONS, "--plant", "0.3", "--quiet"]
    start = time.perf_counter()
    subprocess.run([sys.executable, *audit, "--out", str(folder / "one")], check=True, env=env)
    one = time.perf_counter() - start

    def nodes(out: Path) -> list[subprocess.Popen]:
        port, run_id = _port(), uuid.uuid4().hex[:12]
        node = ["-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1"]
        node += ["--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", run_id]
        return [
            subprocess.Popen(
                [sys.executable, *node, "--node_rank", str(n), *audit, "--out", str(out)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a node's agent and worker: one process group to kill
            )
            for n in (0, 1)
        ]

    def gap(other: str) -> dict[str, float]:
        a, b = (
            pd.read_csv(folder / f / "pairs.csv").set_index("pair_id").sort_index() for f in ("one", other)
        )
        assert list(a.index) == list(b.index)
        return {c: float(np.abs(a[c] - b[c]).max()) for c in ("held_out_score", "mismatch_probability")}

    start = time.perf_counter()
    if any(node.wait() for node in nodes(folder / "two")):
        raise SystemExit("a node failed")
    two = time.perf_counter() - start
    pairs = len(pd.read_csv(folder / "one" / "pairs.csv"))
    print(
        f"{pairs} pairs: one process {one:.1f} s, two nodes over loopback {two:.1f} s "
        f"({one / two:.2f}x); largest differences {gap('two')}"
    )
    if args.kill_after is None:
        return
    first = nodes(folder / "killed")
    time.sleep(args.kill_after)
    os.killpg(first[1].pid, signal.SIGKILL)  # node 1's agent and its worker
    for node in first:
        node.wait()
    start = time.perf_counter()
    if any(node.wait() for node in nodes(folder / "killed")):
        raise SystemExit("a node failed on the second launch")
    print(
        f"node 1 killed {args.kill_after:g} s in; the same commands again took "
        f"{time.perf_counter() - start:.1f} s; largest differences from one process {gap('killed')}"
    )


if __name__ == "__main__":
    main()

"""``mispair audit`` across machines: two torchrun agents, one per "node", meeting at a c10d
rendezvous on 127.0.0.1 (``--nnodes 2``, the commands of ``docs/scale.md`` with the loopback
address for the first node's) over one shared folder, audit as one process does: the same
``pairs.csv``, scores within 1e-4.

Each agent starts one process (``--nproc_per_node 1``); the held-out folds are dealt over the
two ranks, rank 0 merges the scores and writes the audit. About 35 s on two shared CPU cores
(the one-process audit included): in the slow suite (``-m slow``); the default suite shards the
same audit over two ranks with ``--nproc 2`` (``tests/audit/test_audit_nproc.py``)."""

import os
import socket
import subprocess
import sys
import time
import uuid

import numpy as np
import pandas as pd
import pytest

from mispair.data.synthetic import write_synthetic_dataset

from .test_audit_run import PLANT, TINY

ROUNDS = [*TINY, "division.rounds=2"]
"""The tiny audit with a refinement round, so that nested trust's lattice (the audit's default)
runs across the nodes too."""

pytestmark = pytest.mark.slow  # twin in the default run: test_audit_nproc.py (the sharded audit, two ranks)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def node_command(collection, out, node: int, port: int, run_id: str) -> list[str]:
    """What node ``node`` of two runs (``torchrun`` as ``python -m torch.distributed.run``)."""
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes", "2", "--nproc_per_node", "1", "--node_rank", str(node),
        "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", run_id,
        "-m", "mispair", "audit", str(collection), *ROUNDS,
        "--out", str(out), "--plant", str(PLANT), "--quiet",
    ]  # fmt: skip


def _wait_for_listener(port: int, agent: subprocess.Popen, seconds: float = 120.0) -> None:
    """Wait until the first node's agent hosts the rendezvous store on ``port``, as on a cluster,
    where only the machine named by ``--rdzv_endpoint`` can host it (on one machine both agents
    match 127.0.0.1, and whichever binds first would host it)."""
    stop = time.monotonic() + seconds
    while time.monotonic() < stop and agent.poll() is None:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"the first node's agent never listened on port {port}")


@pytest.fixture(scope="module")
def audits(tmp_path_factory):
    root = tmp_path_factory.mktemp("nodes")
    collection = write_synthetic_dataset(root / "toy_precomp", n_train=100, n_dev=30, n_test=30)
    one = [sys.executable, "-m", "mispair", "audit", str(collection), *ROUNDS]
    done = subprocess.run(
        [*one, "--out", str(root / "one"), "--plant", str(PLANT), "--quiet"],
        capture_output=True, text=True, timeout=600, cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    port, run_id = _free_port(), uuid.uuid4().hex[:12]
    env = {"OMP_NUM_THREADS": "1"}
    logs = [(root / f"node{n}.out", root / f"node{n}.err") for n in (0, 1)]
    nodes = []
    for node, (out, err) in enumerate(logs):  # output to files: a full pipe would stall a node
        with open(out, "w") as stdout, open(err, "w") as stderr:
            command = node_command(collection, root / "two", node, port, run_id)
            nodes.append(
                subprocess.Popen(command, stdout=stdout, stderr=stderr, cwd=root, env={**os.environ, **env})
            )
        if node == 0:
            _wait_for_listener(port, nodes[0])
    for node in nodes:
        node.wait(timeout=600)
    outputs = [(out.read_text(), err.read_text()) for out, err in logs]
    failed = [
        f"node {n} (exit {p.returncode}):\n{err[-2500:]}"
        for n, (p, (_, err)) in enumerate(zip(nodes, outputs))
    ]
    assert all(node.returncode == 0 for node in nodes), "\n".join(failed)
    return root / "one", root / "two", outputs


def _table(folder):
    return pd.read_csv(folder / "pairs.csv").set_index("pair_id").sort_index()


def test_two_nodes_over_loopback_write_the_pairs_one_process_writes(audits):
    one, two, _ = audits
    alone, nodes = _table(one), _table(two)
    assert list(alone.index) == list(nodes.index)  # every pair, once
    assert list(alone.columns) == list(nodes.columns)
    for column in ("held_out_score", "mismatch_probability", "q_value"):
        np.testing.assert_allclose(nodes[column], alone[column], atol=1e-4, err_msg=column)
    assert (nodes["suspected"] == alone["suspected"]).all()
    assert (nodes["caption"] == alone["caption"]).all() and (nodes["image_id"] == alone["image_id"]).all()


def test_rank_0_alone_writes_and_reports(audits):
    _, two, outputs = audits
    assert (two / "summary.json").is_file() and (two / "report.html").is_file()
    reports = [out.count("audited 800 of 800 pairs") for out, _ in outputs]
    assert sorted(reports) == [0, 1]  # printed by the node of rank 0 alone

"""``mispair train`` across machines: two torchrun agents, one per "node", meeting at a c10d
rendezvous on 127.0.0.1 (``--nnodes 2``, the commands of ``docs/scale.md`` with the loopback
address for the first node's) over one shared output folder. The run trains with DDP over the
two ranks, rank 0 alone writes the run folder (one ``log.jsonl`` line per epoch, ``best.pt``,
``metrics.json``), and its test rSum is that of one process within the tolerance of the
two-process tests (``tests/engine/test_distributed.py``: each rank's batch has half the in-batch
negatives). About 35 s on two shared CPU cores, the one-process run included: in the slow suite
(``-m slow``), as is the two-node audit (``tests/audit/test_audit_nodes.py``), which trains its
final run with DDP over the same two nodes; the default suite trains with DDP over two processes
(``tests/engine/test_distributed.py``) and audits with ``--nproc 2``
(``tests/audit/test_audit_nproc.py``)."""

import json
import os
import subprocess
import sys
import uuid

import pytest

from mispair.data.synthetic import write_synthetic_dataset
from tests.audit.test_audit_nodes import _free_port, _wait_for_listener
from tests.engine.test_distributed import RSUM_TOLERANCE

TINY = [
    "data.source=precomp",
    "model.embed_dim=16",
    "model.word_dim=8",
    "train.epochs=2",
    "train.batch_size=50",
    "train.threads=1",
    "train.device=cpu",
]


def node_command(collection, out, node: int, port: int, run_id: str) -> list[str]:
    """What node ``node`` of two runs (``torchrun`` as ``python -m torch.distributed.run``)."""
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes", "2", "--nproc_per_node", "1", "--node_rank", str(node),
        "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", run_id,
        "-m", "mispair", "train", f"data.root={collection}", *TINY, "--out", str(out), "--quiet",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("train-nodes")
    collection = write_synthetic_dataset(root / "toy_precomp", n_train=100, n_dev=20, n_test=20)
    one = [sys.executable, "-m", "mispair", "train", f"data.root={collection}", *TINY]
    done = subprocess.run(
        [*one, "--out", str(root / "one"), "--quiet"], capture_output=True, text=True, timeout=600, cwd=root
    )
    assert done.returncode == 0, done.stderr
    port, run_id = _free_port(), uuid.uuid4().hex[:12]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    logs = [(root / f"node{n}.out", root / f"node{n}.err") for n in (0, 1)]
    nodes = []
    for node, (out, err) in enumerate(logs):  # output to files: a full pipe would stall a node
        with open(out, "w") as stdout, open(err, "w") as stderr:
            command = node_command(collection, root / "two", node, port, run_id)
            nodes.append(subprocess.Popen(command, stdout=stdout, stderr=stderr, cwd=root, env=env))
        if node == 0:
            _wait_for_listener(port, nodes[0])
    for node in nodes:
        node.wait(timeout=600)
    failed = [
        f"node {n} (exit {p.returncode}):\n{err.read_text()[-2500:]}"
        for n, (p, (_, err)) in enumerate(zip(nodes, logs))
    ]
    assert all(node.returncode == 0 for node in nodes), "\n".join(failed)
    return root / "one", root / "two"


@pytest.mark.slow
def test_two_nodes_over_loopback_train_one_run_as_one_process_does(runs):
    one, two = runs
    for name in ("best.pt", "last.pt", "metrics.json", "config.json"):
        assert (two / name).is_file(), name
    lines = [json.loads(x) for x in (two / "log.jsonl").read_text().splitlines() if x.strip()]
    assert [row["epoch"] for row in lines] == [0, 1]  # written by rank 0 alone, once per epoch
    alone = json.loads((one / "metrics.json").read_text())
    nodes = json.loads((two / "metrics.json").read_text())
    rsum_alone, rsum_nodes = _rsum(alone), _rsum(nodes)
    assert abs(rsum_nodes - rsum_alone) <= RSUM_TOLERANCE * rsum_alone, (rsum_nodes, rsum_alone)


def _rsum(metrics: dict) -> float:
    found = [v for k, v in _flat(metrics) if k.endswith("rsum")]
    assert found, metrics
    return float(found[0])


def _flat(value, prefix=""):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _flat(inner, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), value

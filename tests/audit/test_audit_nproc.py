"""``mispair audit --nproc 2``: the audit sharded over two CPU processes (torchrun, Gloo) ranks
every pair as one process does.

The held-out scorers' folds are dealt over the processes (each fold's scorer trains whole on one
of them), so the held-out scores, the ranking and the detection equal one process's; the final
run trains a share of each batch per process, so only what it computes (best matches, the map,
the test retrieval) may differ."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from mispair.audit import audit_collection
from mispair.data.synthetic import write_synthetic_dataset

from .test_audit_run import PLANT, TINY


@pytest.fixture(scope="module")
def audits(tmp_path_factory):
    root = tmp_path_factory.mktemp("nproc")
    # 60 pictures, 300 pairs: the sharding is the same on any size, and each audit costs less
    collection = write_synthetic_dataset(root / "toy_precomp", n_train=40, n_dev=10, n_test=10)
    audit_collection(
        collection, root / "one", overrides=TINY, plant=PLANT, progress=False, log=lambda _: None
    )
    command = [sys.executable, "-m", "mispair", "audit", str(collection), *TINY]
    command += ["--out", str(root / "two"), "--plant", str(PLANT), "--quiet", "--nproc", "2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=root)
    assert done.returncode == 0, done.stderr
    return root / "one", root / "two", done.stdout


def _table(folder):
    return pd.read_csv(folder / "pairs.csv").set_index("pair_id").sort_index()


def test_two_processes_rank_every_pair_as_one_process_does(audits):
    one, two, _ = audits
    alone, sharded = _table(one), _table(two)
    assert list(alone.index) == list(sharded.index)  # every pair, once
    np.testing.assert_allclose(sharded["held_out_score"], alone["held_out_score"], atol=1e-5)
    np.testing.assert_allclose(sharded["mismatch_probability"], alone["mismatch_probability"], atol=1e-5)
    assert (sharded["suspected"] == alone["suspected"]).all()
    # the ranking: equal up to pairs whose scores tie at the CSV's rounding
    moved = (sharded["rank"] - alone["rank"]).abs()
    tied = alone.groupby("held_out_score")["rank"].transform("size") - 1
    assert (moved <= tied).all()


def test_the_detection_is_one_process_s_and_rank_0_alone_reports_it(audits):
    one, two, stdout = audits
    detection = [json.loads((f / "summary.json").read_text())["detection"] for f in (one, two)]
    assert abs(detection[0]["auc"] - detection[1]["auc"]) <= 1e-4
    assert stdout.count("audited 300 of 300 pairs") == 1  # printed by rank 0 alone

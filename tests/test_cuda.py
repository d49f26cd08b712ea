"""The CUDA paths against the CPU's: skipped without a GPU, and the suite shows it none unless
``MISPAIR_TEST_DEVICE=cuda`` (tests/conftest.py), so a GPU session runs
``MISPAIR_TEST_DEVICE=cuda python -m pytest tests/test_cuda.py``. On an H100 (2026-11-27) the audit
of a 4,000-pair embeddings table on CUDA gave held-out scores within 8e-6 of the CPU's and the same
suspects (benchmarks/results/cuda_check.md)."""

import importlib
from pathlib import Path

import numpy as np
import pytest
import torch

from mispair.audit import audit_collection
from mispair.config import load_config
from mispair.engine.run import train_run
from mispair.engine.trained import TrainedRun
from tests.engine.test_division_scores import TINY

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible")

EMBEDDINGS = [
    "data.image_embedding_column=img_emb",
    "data.text_embedding_column=txt_emb",
    "data.id_column=id",
]


def _table(folder: Path, monkeypatch) -> Path:
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "benchmarks" / "cuda"))
    importlib.import_module("embeddings_table").write_table(folder, n=1200)
    return folder / "emb.parquet"


def test_the_audit_on_cuda_scores_and_suspects_as_on_the_cpu(tmp_path, monkeypatch):
    table = _table(tmp_path / "collection", monkeypatch)
    found = {}
    for device in ("cpu", "cuda"):
        result = audit_collection(
            table, tmp_path / device, overrides=[*EMBEDDINGS, f"train.device={device}"], progress=False
        )
        found[device] = result.pairs.set_index("pair_id").sort_index()
    cpu, cuda = found["cpu"], found["cuda"]
    assert np.allclose(cpu["held_out_score"], cuda["held_out_score"], atol=1e-4)
    assert (cpu["suspected"] == cuda["suspected"]).mean() > 0.99


def test_a_run_trained_on_cuda_reopens_on_cuda_and_on_the_cpu_alike(tmp_path):
    """Trained on CUDA, run again (the finished run is read back, not trained again), and opened
    on either device: the same models, to float rounding."""
    config = load_config(
        None,
        [*TINY, "method.loss=infonce", "train.epochs=2", "train.device=cuda", f"output={tmp_path / 'run'}"],
    )
    train_run(config, progress=False, log=print)
    train_run(config, progress=False, log=print)
    runs = {
        device: TrainedRun.open(tmp_path / "run" / "best.pt", device=device) for device in ("cpu", "cuda")
    }
    for cpu, cuda in zip(runs["cpu"].models, runs["cuda"].models):
        for (name, a), b in zip(cpu.state_dict().items(), cuda.state_dict().values()):
            assert a.device.type == "cpu" and b.device.type == "cuda", name
            assert torch.equal(a, b.cpu()), name

"""Every command validates all of its input before it writes anything."""

from __future__ import annotations

import numpy as np
import pytest

from mispair.cli import main
from mispair.data.precomp import write_precomp
from mispair.data.synthetic import make_synthetic
from tests.audit.test_audit_errors import TINY as AUDIT_TINY
from tests.audit.test_audit_errors import _collection
from tests.cli_errors import one_line_error

SMALL = [
    "model.text_encoder=bigru",
    "model.image_pooling=fragments",
    "model.embed_dim=16",
    "model.word_dim=8",
    "train.epochs=1",
    "train.batch_size=20",
    "train.threads=1",
]


@pytest.fixture
def grid(tmp_path):
    """A precomputed collection of 7×7 = 49 fragments per image (SGR's default is 36)."""
    root = tmp_path / "grid"
    for split, seed in (("train", 0), ("dev", 1), ("test", 2)):
        pairs = make_synthetic(20, 2, seed=seed)
        pairs.images = np.random.default_rng(seed).normal(size=(20, 49, 32)).astype(np.float32)
        write_precomp(pairs, root, split)
    return root


def test_train_checks_the_head_against_the_data_before_writing(tmp_path, grid, capsys):
    out = tmp_path / "run"
    code = main(
        ["train", "data.source=precomp", f"data.root={grid}", "model.head=sgr", *SMALL, "--out", str(out)]
    )
    one_line_error(code, capsys.readouterr().err.strip().splitlines()[-1], "num_regions=49")
    assert not out.exists()


def test_audit_reads_the_collection_before_writing(tmp_path, capsys):
    rows = [(f"im{n}.npy", f"caption {n}") for n in range(3)] + [
        (f"missing{n}.npy", "gone") for n in range(5)
    ]
    data, out = _collection(tmp_path / "c", rows), tmp_path / "out"
    code = main(["audit", str(data), "--out", str(out), "--quiet", *AUDIT_TINY])
    one_line_error(code, capsys.readouterr().err, "5 of 8 rows refused")
    assert not out.exists()


def test_prepare_into_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "taken").write_text("mine")
    code = main(["prepare", "synthetic", "--out", str(tmp_path / "taken"), "--quiet"])
    one_line_error(code, capsys.readouterr().err, "taken: the dataset folder is a file")
    assert (tmp_path / "taken").read_text() == "mine"

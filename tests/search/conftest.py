"""A small precomputed collection and tiny trainings on it (a cosine run and an SGR run), shared by
the search tests."""

import contextlib
import io

import pytest

from mispair.cli import main
from mispair.data.synthetic import write_synthetic_dataset

TINY = [
    "data.source=precomp",
    "model.embed_dim=16",
    "model.word_dim=8",
    "train.epochs=1",
    "train.batch_size=50",
    "train.threads=1",
]
SGR = ["model.head=sgr", "model.head_options={num_regions: 12, sim_dim: 8, sgr_step: 1}"]


def run_cli(*argv) -> tuple[int, str, str]:
    """``mispair ARGV``: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="package")
def collection(tmp_path_factory):
    """160 synthetic images (100 train, 20 dev, 40 test), 5 captions each, 12 fragments of 64."""
    return write_synthetic_dataset(
        tmp_path_factory.mktemp("search") / "syn_precomp", n_train=100, n_dev=20, n_test=40
    )


def _train(root, out, *extra) -> None:
    code, _, err = run_cli("train", *TINY, f"data.root={root}", *extra, "--out", out, "--quiet")
    assert code == 0, err


@pytest.fixture(scope="package")
def cosine_checkpoint(collection, tmp_path_factory):
    out = tmp_path_factory.mktemp("cosine")
    _train(collection, out)
    return out / "best.pt"


@pytest.fixture(scope="package")
def sgr_checkpoint(collection, tmp_path_factory):
    out = tmp_path_factory.mktemp("sgr")
    _train(collection, out, *SGR)
    return out / "best.pt"


@pytest.fixture(scope="package")
def test_split_index(collection, cosine_checkpoint, tmp_path_factory):
    """``mispair index`` of the collection's test split under the cosine run (flat, exact)."""
    out = tmp_path_factory.mktemp("test-split") / "syn.index"
    code, _, err = run_cli("index", cosine_checkpoint, collection, "--out", out, "--split", "test", "--quiet")
    assert code == 0, err
    return out

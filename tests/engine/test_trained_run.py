"""A trained run saved and opened again is the same run (encodings, tokens, division state,
fingerprint), and a corrupt or mismatched checkpoint is a one-line error naming its file."""

import contextlib
import io

import numpy as np
import pytest
import torch

from mispair.cli import main
from mispair.data.synthetic import make_synthetic
from mispair.encoding import encode_split
from mispair.engine.trained import TrainedRun, load_checkpoint, save_checkpoint
from mispair.errors import ConfigError, DataError
from tests.conftest import small_model

TINY = [
    "data.synthetic_images=60",
    "model.embed_dim=16",
    "model.word_dim=8",
    "train.epochs=1",
    "train.batch_size=30",
    "train.threads=1",
    "recipe=ncr",
    "method.warmup_epochs=0",
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    err = io.StringIO()
    # the tests' model (a module's fixture is set up before each test's small_default_model)
    with small_model(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["train", "data.source=synthetic", *TINY, "--out", str(out), "--quiet"])
    assert code == 0, err.getvalue()
    return out / "best.pt"


def encodings(run: TrainedRun) -> list[torch.Tensor]:
    """Every model's pooled image and caption embeddings of a fixed synthetic set."""
    pairs = make_synthetic(12, 2, seed=5)
    tokens = run.tokens(pairs)
    out = []
    for model in run.models:
        images, texts = encode_split(model, pairs, tokens, batch_size=5)
        out += [images.pooled, texts.pooled]
    return out


def test_save_then_open_gives_the_same_run(checkpoint, tmp_path):
    run = TrainedRun.open(checkpoint, "cpu")
    assert len(run.models) == 2 and run.clean_prob is not None  # ncr: two models and a division
    run.save(tmp_path / "copy.pt")
    again = TrainedRun.open(tmp_path / "copy.pt", "cpu")
    for a, b in zip(encodings(run), encodings(again), strict=True):
        assert torch.equal(a, b)
    assert again.config == run.config and again.vocabulary == run.vocabulary
    assert again.features == run.features
    assert np.array_equal(again.clean_prob, run.clean_prob)
    assert again.fingerprint == run.fingerprint
    assert again.provenance.best_dev == run.provenance.best_dev
    assert again.provenance.path == tmp_path / "copy.pt" != run.provenance.path
    assert all(not m.training for m in again.models)


def test_the_fingerprint_sees_every_weight(checkpoint, tmp_path):
    run = TrainedRun.open(checkpoint, "cpu")
    with torch.no_grad():
        next(run.models[1].parameters()).view(-1)[0] += 1e-3
    run.save(tmp_path / "moved.pt")
    assert (
        TrainedRun.open(tmp_path / "moved.pt", "cpu").fingerprint != TrainedRun.open(checkpoint).fingerprint
    )


def _edited(checkpoint, tmp_path, edit) -> str:
    payload = load_checkpoint(checkpoint)
    edit(payload)
    path = tmp_path / "edited.pt"
    save_checkpoint(path, {k: v for k, v in payload.items() if k != "format"})
    return str(path)


CORRUPT = {
    "no models": (lambda p: p.pop("models"), DataError, "'models' is missing or malformed"),
    "no config": (lambda p: p.pop("config"), DataError, "'config' is missing or malformed"),
    "bad epoch": (lambda p: p.update(epoch="one"), DataError, "'epoch' is missing or malformed"),
    "no sizes": (lambda p: p.pop("feature_dim"), DataError, "no feature_dim or vocab_size"),
    "unknown config key": (lambda p: p["config"]["model"].update(colour=1), ConfigError, "colour"),
    "other weights": (lambda p: p["models"][0].popitem(), DataError, "weights do not fit the model"),
    "no model": (lambda p: p.update(models=[]), DataError, "holds no model"),
}


@pytest.mark.parametrize("case", CORRUPT)
def test_a_corrupt_checkpoint_is_one_line_naming_its_file(checkpoint, tmp_path, case):
    edit, error, fragment = CORRUPT[case]
    path = _edited(checkpoint, tmp_path, edit)
    with pytest.raises(error) as raised:
        TrainedRun.open(path, "cpu")
    message = str(raised.value)
    assert path in message and fragment in message and "\n" not in message


def test_a_truncated_or_missing_file_is_one_line(checkpoint, tmp_path):
    truncated = tmp_path / "cut.pt"
    truncated.write_bytes(checkpoint.read_bytes()[:1000])
    with pytest.raises(DataError, match=r"cut\.pt: not a readable mispair checkpoint"):
        TrainedRun.open(truncated, "cpu")
    with pytest.raises(DataError, match=r"gone\.pt: checkpoint not found"):
        TrainedRun.open(tmp_path / "gone.pt", "cpu")

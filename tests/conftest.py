"""Tests build their small runs on ``load_config(None, ...)``: the embedded default run with
overrides. That default trains on the pretrained backbone (frozen MiniLM), which costs a model load
and a pass over every synthetic caption; tests get the small BiGRU model instead, unless marked
``pretrained_default`` (tests of the backbone itself set ``model.text_encoder=minilm``).

The suite runs on the CPU unless ``MISPAIR_TEST_DEVICE=cuda`` (then every test sees the GPU, and
``tests/test_cuda.py`` compares the CUDA paths with the CPU's). The test run caches into a folder
of its own (``MISPAIR_CACHE``, unless set already), never into the user's cache folder;
subprocesses inherit it."""

import os
import shutil
import tempfile

if os.environ.get("MISPAIR_TEST_DEVICE", "cpu") == "cpu":
    # The suite's references are CPU arithmetic (exact resumes, side-by-side equalities, golden
    # runs), so it runs on the CPU even where a GPU is visible, as CI does (subprocesses inherit
    # this); MISPAIR_TEST_DEVICE=cuda shows the GPU to every test (tests/test_cuda.py among them).
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

import pytest

from mispair import config

SMALL_MODEL = {
    "head": "cosine",
    "text_encoder": "bigru",
    "image_pooling": "fragments",
    "embed_dim": 256,
    "word_dim": 300,
}


@pytest.fixture(autouse=True)
def small_default_model(request, monkeypatch):
    if request.node.get_closest_marker("pretrained_default") is None:
        monkeypatch.setitem(config.DEFAULT_RUN, "model", dict(SMALL_MODEL))


_OWN_CACHE: list[str] = []


def pytest_configure(config):
    if "MISPAIR_CACHE" not in os.environ:
        _OWN_CACHE.append(tempfile.mkdtemp(prefix="mispair-test-cache-"))
        os.environ["MISPAIR_CACHE"] = _OWN_CACHE[0]


def pytest_unconfigure(config):
    for folder in _OWN_CACHE:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("MISPAIR_CACHE", None)

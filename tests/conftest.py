"""Tests build their small runs on ``load_config(None, ...)``: the embedded default run with
overrides. That default trains on the pretrained backbone (frozen MiniLM), which costs a model load
and a pass over every synthetic caption; tests get the small BiGRU model instead, unless marked
``pretrained_default`` (tests of the backbone itself set ``model.text_encoder=minilm``)."""

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

"""A split's evaluation streamed a block of images at a time (above ``STREAMED_ABOVE`` bytes of
similarities) gives the metrics of the whole matrix: two co-trained models, five folds, the
equivalent-caption recalls, any number of captions per image."""

import numpy as np
import pytest
import torch

import mispair.engine.evaluation as evaluation
import mispair.engine.metrics as metrics
from mispair.config import ModelConfig
from mispair.data.batching import encode_captions
from mispair.data.pairset import PairSet
from mispair.data.synthetic import make_synthetic
from mispair.data.vocab import Vocabulary
from mispair.engine.evaluation import evaluate_split
from mispair.nn.assembly import build_model


@pytest.mark.parametrize("head", ["cosine", None])  # None: the default head (SGR)
def test_a_streamed_evaluation_equals_the_whole_matrixs(head, monkeypatch):
    pairs = make_synthetic(40, 5, seed=1)
    vocab = Vocabulary.build(pairs.captions, 1)
    torch.manual_seed(0)
    config = ModelConfig(embed_dim=32, word_dim=16, **({} if head is None else {"head": head}))
    models = [build_model(config, pairs.feature_dim, len(vocab)) for _ in range(2)]
    uneven = PairSet(  # 1 to 9 captions an image, half of them repeated: eq_ recalls too
        images=pairs.images,
        captions=pairs.captions[:100] * 2,
        image_of_caption=np.sort(np.random.default_rng(2).integers(0, 40, len(pairs.captions))),
    )
    cases = [(pairs, 1), (pairs, 5), (uneven, 1)]
    whole = [
        evaluate_split(models, split, encode_captions(split, vocab), folds=folds, batch_size=16)
        for split, folds in cases
    ]
    monkeypatch.setattr(evaluation, "STREAMED_ABOVE", 0)
    monkeypatch.setattr(metrics, "STREAM_TILE", 7 * 200)  # 7 images a block
    asked = []
    real = evaluation.streamed_retrieval_metrics
    monkeypatch.setattr(
        evaluation, "streamed_retrieval_metrics", lambda *a, **k: asked.append(1) or real(*a, **k)
    )
    streamed = [
        evaluate_split(models, split, encode_captions(split, vocab), folds=folds, batch_size=16)
        for split, folds in cases
    ]
    assert len(asked) >= 3
    assert "eq_rsum" in whole[2]
    for want, got in zip(whole, streamed):
        assert got == pytest.approx(want, abs=1e-9)

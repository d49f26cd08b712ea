"""A recipe on a small synthetic training set, for step-level tests of any recipe."""

import pytest
import torch

from mispair.config import ModelConfig
from mispair.data.batching import TrainingPairs, encode_captions
from mispair.data.noise import inject_noise
from mispair.data.synthetic import make_synthetic
from mispair.data.vocab import Vocabulary
from mispair.methods.base import RecipeContext, build_options, get_recipe
from mispair.nn.assembly import build_model


@pytest.fixture
def make_recipe():
    """``make_recipe(name, batch_size=16, **options)``: 30 images × 5 captions, 40% pmp noise."""

    def build(name: str, batch_size: int = 16, eval_batch_size: int = 64, **options):
        pairs = make_synthetic(30, 5, seed=0)
        vocab = Vocabulary.build(pairs.captions, 1)
        noise = inject_noise(30, 5, 0.4, "pmp", seed=0)
        train = TrainingPairs(pairs, encode_captions(pairs, vocab), noise.image_of_caption)
        context = RecipeContext(
            train, batch_size, 4, torch.device("cpu"), 0, eval_batch_size=eval_batch_size, noise=noise
        )
        cls = get_recipe(name)
        torch.manual_seed(0)
        models = [
            build_model(ModelConfig(embed_dim=32, word_dim=16), pairs.feature_dim, len(vocab))
            for _ in range(cls.n_models)
        ]
        return cls(models, build_options(cls, options), context)

    return build

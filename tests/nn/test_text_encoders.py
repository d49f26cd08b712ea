"""The text-encoder registry: a new encoder is one class with its registration, nothing else."""

import pytest
import torch
from torch import nn

from mispair.config import ModelConfig, load_config
from mispair.engine.run import evaluate_checkpoint, train_run
from mispair.errors import ConfigError
from mispair.nn.assembly import build_model
from mispair.nn.embedding import Fragments, l2_normalize, masked_mean
from mispair.nn.text import list_text_encoders, register_text_encoder, text_encoder_class


@register_text_encoder("toy-bag-of-words")
class BagOfWords(nn.Module):
    """A toy encoder: each word's embedding projected; the caption is their mean."""

    tokenizer = "vocabulary"

    def __init__(self, vocab_size: int, embed_dim: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=0)

    @classmethod
    def from_config(cls, cfg: ModelConfig, vocab_size: int) -> "BagOfWords":
        return cls(vocab_size, cfg.embed_dim)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> Fragments:
        words = self.embed(tokens)
        mask = torch.arange(tokens.shape[1])[None, :] < lengths[:, None]
        return Fragments(
            l2_normalize(words), mask, l2_normalize(masked_mean(words, mask)), words.norm(dim=-1)
        )


def test_registered_encoders():
    assert {"bigru", "minilm", "toy-bag-of-words"} <= set(list_text_encoders())
    assert text_encoder_class("bigru").tokenizer == "vocabulary"
    assert text_encoder_class("minilm").tokenizer == "minilm"
    with pytest.raises(ConfigError, match=r"^model\.text_encoder: unknown text encoder 'gpt'"):
        text_encoder_class("gpt")


def test_model_assembly_uses_the_registry():
    model = build_model(ModelConfig(text_encoder="toy-bag-of-words", embed_dim=8), 6, 20)
    assert isinstance(model.text_encoder, BagOfWords) and model.text_encoder.embed.num_embeddings == 20


def test_a_new_encoder_trains_and_evaluates_with_no_other_change(tmp_path):
    overrides = [
        "data.source=synthetic",
        "data.synthetic_images=200",
        "model.text_encoder=toy-bag-of-words",
        "model.embed_dim=32",
        "train.epochs=3",
        "train.batch_size=50",
        "train.lr=0.005",
        "train.threads=1",
        f"output={tmp_path}",
    ]
    summary = train_run(load_config(None, overrides), progress=False, log=lambda m: None)
    assert summary["test"]["rsum"] > 150  # learns: random scores give about 16 on 200 test images
    assert evaluate_checkpoint(tmp_path / "best.pt") == pytest.approx(summary["test"])

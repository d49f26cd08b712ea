"""NCR's text encoder: learned word embeddings and a bidirectional GRU."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from mispair.config import ModelConfig
from mispair.nn.embedding import Fragments, l2_normalize, masked_mean
from mispair.nn.text import register_text_encoder


@register_text_encoder("bigru")
class BiGRUTextEncoder(nn.Module):
    """Word embeddings → bidirectional GRU, both directions averaged, L2-normalised per word
    (the norms before normalisation kept in ``Fragments.norms``).

    As NCR's ``EncoderText`` (word_dim 300, one layer). Input token ids ``[B, L]`` (0 = padding)
    and ``lengths [B]``; output ``Fragments`` with ``local [B, L, embed_dim]``, ``mask [B, L]`` and
    ``pooled [B, embed_dim]`` (normalised mean of the real words).
    """

    tokenizer = "vocabulary"

    def __init__(
        self, vocab_size: int, word_dim: int = 300, embed_dim: int = 1024, num_layers: int = 1
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, word_dim, padding_idx=0)
        self.rnn = nn.GRU(word_dim, embed_dim, num_layers, batch_first=True, bidirectional=True)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)

    @classmethod
    def from_config(cls, cfg: ModelConfig, vocab_size: int) -> BiGRUTextEncoder:
        return cls(vocab_size, cfg.word_dim, cfg.embed_dim)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Fragments:
        lengths = lengths.clamp(min=1)
        words = self.embed(tokens)
        packed = pack_padded_sequence(words, lengths.cpu(), batch_first=True, enforce_sorted=False)
        output, _ = self.rnn(packed)
        output, _ = pad_packed_sequence(output, batch_first=True, total_length=tokens.shape[1])
        half = output.shape[2] // 2
        local = (output[:, :, :half] + output[:, :, half:]) / 2
        norms, local = local.norm(dim=-1), l2_normalize(local)
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        mask = positions[None, :] < lengths[:, None].to(tokens.device)
        return Fragments(local, mask, l2_normalize(masked_mean(local, mask)), norms)

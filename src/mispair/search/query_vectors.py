"""The function an index's query encoder computes, as a torch module (exported to ONNX by
:mod:`mispair.search.query_encoder`; imported only when an index is built)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn

from mispair.nn.embedding import l2_normalize, masked_mean
from mispair.nn.text.minilm import frozen_minilm

if TYPE_CHECKING:
    from mispair.search.model import SearchModel


class QueryVectors(nn.Module):
    """``[B, n × embed_dim]`` index vectors of padded WordPiece ids and their mask ``[B, L]``
    (1 at the words): MiniLM's mean token state, each of the ``n`` models' projection,
    L2-normalised, concatenated and divided by ``√n``, what
    :meth:`~mispair.search.model.SearchModel.text_vectors` computes for models reading a frozen
    float32 MiniLM (and, up to bfloat16's rounding, a bfloat16 one)."""

    def __init__(self, projections: list[nn.Module]) -> None:
        super().__init__()
        self.bert = frozen_minilm()
        self.projections = nn.ModuleList(projections)
        self.scale = 1 / math.sqrt(len(projections))

    @classmethod
    def of(cls, model: SearchModel) -> QueryVectors:
        """The query vectors of ``model``'s models (their text encoders' projections)."""
        return cls([m.text_encoder.fc for m in model.models])  # type: ignore[misc]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        states = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mean = masked_mean(states, attention_mask.bool())
        return torch.cat([l2_normalize(p(mean)) * self.scale for p in self.projections], dim=1)

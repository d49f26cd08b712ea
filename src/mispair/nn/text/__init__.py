"""Text encoders and their registry.

A text encoder is an ``nn.Module`` mapping token ids ``[B, L]`` (0 = padding) and ``lengths [B]``
to :class:`~mispair.nn.embedding.Fragments`. Its class names the tokenizer it reads
(``tokenizer``, a name registered in :mod:`mispair.data.tokenizers`) and builds itself from the
model config (``from_config(cfg, vocab_size)``). Modules in this package register themselves with
:func:`register_text_encoder`: adding a text encoder adds one file.
"""

from __future__ import annotations

from typing import Any

from mispair.registry import Registry

TEXT_ENCODERS: Registry[Any] = Registry("text encoder", "model.text_encoder", __name__)
register_text_encoder = TEXT_ENCODERS.register
list_text_encoders = TEXT_ENCODERS.names
text_encoder_class = TEXT_ENCODERS.get

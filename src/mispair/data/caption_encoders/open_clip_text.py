"""An open_clip model's text tower (``pip install 'mispair[clip]'``): each caption's embedding, in
the space of the same model's image tower (``data.image_encoder: open_clip``).

Options as the image encoder's: ``model``, ``checkpoint`` (local weights), optional ``config``.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from mispair.data.caption_encoders import register_caption_encoder
from mispair.data.image_encoders import require, weights_file, weights_tag
from mispair.data.image_encoders.open_clip_models import open_clip_model

KEY = "data.caption_encoder_options"


@register_caption_encoder("open_clip")
class OpenClipText:
    shares_space_with = "open_clip"  # its vectors lie in this image encoder's space (same options)

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        path = weights_file(options, KEY)
        self.cache_name = f"open_clip-{options.get('model') or 'custom'}-{weights_tag(path)}"

    @functools.cached_property
    def _model(self) -> tuple[Any, Any]:
        model, name, _ = open_clip_model(self.options, KEY)
        return model, require("open_clip", "clip").get_tokenizer(name)

    def encode(self, captions: list[str]) -> np.ndarray:
        model, tokenizer = self._model
        with torch.inference_mode():
            return model.encode_text(tokenizer(captions)).float().numpy()

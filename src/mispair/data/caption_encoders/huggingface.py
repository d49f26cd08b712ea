"""A Hugging Face transformer from a local folder (``save_pretrained``'s files: config, weights,
tokenizer): each caption's token states, mean-pooled over its tokens (sentence-transformers'
pooling). Options: ``path`` (the folder), ``max_length`` (tokens per caption, default 64).
Nothing is downloaded.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mispair.data.caption_encoders import register_caption_encoder
from mispair.data.image_encoders import require
from mispair.errors import ConfigError

KEY = "data.caption_encoder_options"


@register_caption_encoder("huggingface")
class HuggingFaceText:
    def __init__(self, options: dict[str, Any]) -> None:
        folder = options.get("path")
        if not folder or not Path(folder, "config.json").is_file():
            raise ConfigError(
                f"{KEY}.path: a folder with a Hugging Face model's files (config.json), got {folder!r}"
            )
        self.folder, self.max_length = Path(folder), int(options.get("max_length", 64))
        digest = hashlib.blake2b(digest_size=6)
        for file in sorted(p for p in self.folder.rglob("*") if p.is_file()):
            digest.update(
                f"{file.relative_to(self.folder)}:{file.stat().st_size}:{file.stat().st_mtime_ns}".encode()
            )
        self.cache_name = f"hf-{self.folder.name}-{self.max_length}-{digest.hexdigest()}"

    @functools.cached_property
    def _model(self) -> tuple[Any, Any]:
        transformers = require("transformers", "minilm")
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(self.folder), local_files_only=True)
            model = transformers.AutoModel.from_pretrained(str(self.folder), local_files_only=True)
        except (OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"{KEY}.path: {self.folder}: not a loadable model ({first})") from None
        return tokenizer, model.train(False)

    def encode(self, captions: list[str]) -> np.ndarray:
        tokenizer, model = self._model
        batch = tokenizer(
            captions, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        with torch.inference_mode():
            states = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).last_hidden_state
        mask = batch["attention_mask"][..., None].to(states.dtype)
        return ((states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).float().numpy()

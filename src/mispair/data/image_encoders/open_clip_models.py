"""An open_clip model's image embedding, weights from a local file (``pip install 'mispair[clip]'``).

Options: ``model`` (an open_clip architecture name, e.g. ``ViT-B-32``), ``checkpoint`` (its weights
on disk), and optionally ``config`` (a JSON model config file defining an architecture open_clip
does not ship; its file name without ``.json`` is then the name). Nothing is downloaded. Each
picture gives one vector, the image tower's embedding (``[D, 1, 1]``), in the space of the
model's text tower (``data.caption_encoder: open_clip`` with the same options).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor, nn

from mispair.data.image_encoders import (
    frozen,
    load_weights,
    register_image_encoder,
    renormalise,
    require,
    weights_file,
    weights_tag,
)
from mispair.errors import ConfigError

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def open_clip_model(options: dict[str, Any], key: str) -> tuple[Any, str, Path]:
    """The frozen open_clip model of ``options`` with its weights, its name and its weights file."""
    open_clip = require("open_clip", "clip")
    name = options.get("model")
    if options.get("config"):
        config = Path(options["config"])
        if not config.is_file():
            raise ConfigError(f"{key}.config: {config}: no such file")
        open_clip.add_model_config(config)
        name = name or config.stem
    if not name:
        raise ConfigError(f"{key}.model: an open_clip architecture name (e.g. ViT-B-32)")
    path = weights_file(options, key)
    if name not in open_clip.list_models():
        raise ConfigError(
            f"{key}.model: unknown open_clip architecture {name!r} (give a JSON config as {key}.config)"
        )
    model = open_clip.create_model(name, pretrained=None)
    load_weights(model, path, f"open_clip's {name}", key)
    return frozen(model), name, path


class OpenClipImage(nn.Module):
    """``[B, 3, S, S] -> [B, D, 1, 1]``: the image tower's embedding."""

    def __init__(self, model: nn.Module, name: str, tag: str) -> None:
        super().__init__()
        self.model = model
        size = getattr(model.visual, "image_size", 224)
        self.image_size = int(size[0] if isinstance(size, (tuple, list)) else size)
        config = getattr(model.visual, "preprocess_cfg", None) or {}
        self.mean, self.std = tuple(config.get("mean", CLIP_MEAN)), tuple(config.get("std", CLIP_STD))
        self.cache_name = f"open_clip-{name}-{self.image_size}-{tag}"

    def forward(self, pixels: Tensor) -> Tensor:
        return self.model.encode_image(renormalise(pixels, self.mean, self.std))[:, :, None, None]


@register_image_encoder("open_clip")
def build(options: dict[str, Any]) -> nn.Module:
    model, name, path = open_clip_model(options, "data.image_encoder_options")
    return OpenClipImage(model, name, weights_tag(path))

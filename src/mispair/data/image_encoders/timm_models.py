"""A timm image model's last feature map, weights from a local file (``pip install 'mispair[timm]'``).

Options: ``model`` (a timm architecture name, e.g. ``resnet50``, ``convnext_tiny``), ``checkpoint``
(its weights on disk: a state dict saved with ``torch.save``). The model is built without its
classifier (``num_classes=0``) and without downloading anything; its input size and normalisation
are those of its ``pretrained_cfg``. A CNN gives its ``[D, h, w]`` grid; a transformer its tokens
(``[D, tokens, 1]``).
"""

from __future__ import annotations

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


class TimmFeatures(nn.Module):
    """``[B, 3, S, S] -> [B, D, h, w]``: ``model.forward_features`` of a timm model."""

    def __init__(self, model: nn.Module, name: str, tag: str) -> None:
        super().__init__()
        self.model = model
        config = getattr(model, "pretrained_cfg", None) or {}
        self.image_size = int(config.get("input_size", (3, 224, 224))[-1])
        self.mean = tuple(config.get("mean", (0.485, 0.456, 0.406)))
        self.std = tuple(config.get("std", (0.229, 0.224, 0.225)))
        self.cache_name = f"timm-{name}-{self.image_size}-{tag}"

    def forward(self, pixels: Tensor) -> Tensor:
        features = self.model.forward_features(renormalise(pixels, self.mean, self.std))
        if features.ndim == 3:  # transformer tokens [B, N, D]
            return features.transpose(1, 2)[..., None]
        return features


@register_image_encoder("timm")
def build(options: dict[str, Any]) -> nn.Module:
    timm = require("timm", "timm")
    name = options.get("model")
    if not name:
        raise ConfigError("data.image_encoder_options.model: a timm architecture name (e.g. resnet50)")
    path = weights_file(options)
    try:
        model = timm.create_model(name, pretrained=False, num_classes=0)
    except RuntimeError as exc:  # timm's "Unknown model"
        raise ConfigError(f"data.image_encoder_options.model: {exc}") from None
    load_weights(model, path, f"timm's {name}")
    return TimmFeatures(frozen(model), name, weights_tag(path))

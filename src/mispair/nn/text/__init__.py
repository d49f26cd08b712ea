"""Text encoders and their registry.

A text encoder is an ``nn.Module`` mapping token ids ``[B, L]`` (0 = padding) and ``lengths [B]``
to :class:`~mispair.nn.embedding.Fragments`. Its class names the tokenizer it reads
(``tokenizer``, a name registered in :mod:`mispair.data.tokenizers`) and builds itself from the
model config (``from_config(cfg, vocab_size)``). Modules in this package register themselves with
:func:`register_text_encoder`: adding a text encoder adds one file.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

from torch import nn

from mispair.errors import ConfigError

_TEXT_ENCODERS: dict[str, Any] = {}


def register_text_encoder(name: str) -> Callable[[type[nn.Module]], type[nn.Module]]:
    """Class decorator registering a text encoder under ``name``."""

    def add(cls: type[nn.Module]) -> type[nn.Module]:
        _TEXT_ENCODERS[name] = cls
        return cls

    return add


def _load_all() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


def list_text_encoders() -> list[str]:
    """Names of the registered text encoders."""
    _load_all()
    return sorted(_TEXT_ENCODERS)


def text_encoder_class(name: str) -> Any:
    """The class registered as ``name`` (a one-line error naming ``model.text_encoder``)."""
    _load_all()
    if name not in _TEXT_ENCODERS:
        known = ", ".join(sorted(_TEXT_ENCODERS))
        raise ConfigError(f"model.text_encoder: unknown text encoder {name!r} (known: {known})")
    return _TEXT_ENCODERS[name]

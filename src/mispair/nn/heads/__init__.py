"""Similarity heads and their registry.

A head is an ``nn.Module`` built as ``cls(embed_dim, **options)`` (the options typed by the
constructor's annotations), or as ``cls(embed_dim, cls.Options(**options))`` when it declares its
options as a dataclass ``Options``. Its ``forward(images: Fragments, texts: Fragments) ->
Tensor[Bi, Bt]`` scores every image against every caption (higher = more similar), vectorised
over both axes. Modules in this package
register themselves with :func:`register_head`; adding a head adds one file.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from torch import nn

from mispair.errors import ConfigError
from mispair.options import build_dataclass, build_kwargs
from mispair.registry import Registry

HEADS: Registry[type[nn.Module]] = Registry("head", "model.head", __name__)
register_head = HEADS.register
list_heads = HEADS.names


def head_reads_fragments(head: str) -> bool:
    """Whether head ``head`` reads fragment embeddings (``needs_fragments``, default True) or only
    the pooled ones (the cosine head)."""
    return getattr(HEADS.get(head), "needs_fragments", True)


def head_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """The checked keyword options of head ``name`` (an unknown head, key or a wrong-typed value
    is a one-line :class:`ConfigError` naming it); builds nothing."""
    cls = HEADS.get(name)
    if hasattr(cls, "Options"):  # a head whose options are a dataclass of their own
        return dataclasses.asdict(build_dataclass(cls.Options, options, "model.head_options"))
    return build_kwargs(cls.__init__, options, "model.head_options", skip=1)


def create_head(name: str, embed_dim: int, **options: Any) -> nn.Module:
    """Build the head registered as ``name``; ``options`` are its constructor's keyword
    parameters after ``embed_dim``, checked against their annotations (a bad one is a one-line
    error naming ``model.head_options.<key>``)."""
    checked = head_options(name, options)
    cls = HEADS.get(name)
    try:
        if hasattr(cls, "Options"):
            return cls(embed_dim, cls.Options(**checked))
        return cls(embed_dim, **checked)
    except ValueError as exc:
        raise ConfigError(f"model.head_options ({name}): {exc}") from None

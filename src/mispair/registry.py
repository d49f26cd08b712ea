"""Named registries of parts (recipes, similarity heads, text encoders, tokenizers).

A part registers itself where it is defined (``@REGISTRY.register("name")``); a registry whose
parts live in a package imports every module of it on first use, so adding a part is adding one
file. Looking up an unknown name is a one-line :class:`~mispair.errors.ConfigError` that names
the config key and the known names.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Generic, TypeVar

from mispair.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Parts of one kind by name.

    Args:
        kind: what a part is, for messages (``"head"``).
        key: the config key that names a part (``"model.head"``).
        package: the package whose modules define the parts (imported on first use), if any.
    """

    def __init__(self, kind: str, key: str, package: str | None = None) -> None:
        self.kind, self.key, self.package = kind, key, package
        self._parts: dict[str, T] = {}
        self._loaded = package is None

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator adding the decorated part under ``name``."""

        def add(part: T) -> T:
            self._parts[name] = part
            return part

        return add

    def names(self) -> list[str]:
        """The registered names, sorted."""
        self._load()
        return sorted(self._parts)

    def get(self, name: str) -> T:
        """The part registered as ``name``."""
        self._load()
        if name not in self._parts:
            known = ", ".join(sorted(self._parts))
            raise ConfigError(f"{self.key}: unknown {self.kind} {name!r} (known: {known})")
        return self._parts[name]

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        package = importlib.import_module(self.package)
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{self.package}.{module.name}")

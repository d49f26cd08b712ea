"""The registries of parts: registration, lazy discovery, one-line errors for unknown names."""

import pytest

from mispair.errors import ConfigError
from mispair.methods import list_recipes
from mispair.nn.heads import HEADS
from mispair.registry import Registry


def test_register_and_get():
    parts: Registry[int] = Registry("widget", "model.widget")
    parts.register("b")(2)
    parts.register("a")(1)
    assert parts.names() == ["a", "b"] and parts.get("b") == 2
    with pytest.raises(ConfigError, match=r"^model\.widget: unknown widget 'c' \(known: a, b\)$"):
        parts.get("c")


def test_a_package_registry_finds_every_module_of_its_package():
    assert HEADS.names() == ["cam", "cosine", "omit", "saf", "sgr"]
    assert {"vse", "vse2", "rcl", "ncr", "asl", "pc2", "l2rm", "omit", "holdout"} == set(list_recipes())

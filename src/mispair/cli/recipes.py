"""``mispair recipes``: the registered recipes, similarity heads and text encoders."""

from __future__ import annotations

import argparse

from mispair.cli.options import (
    Subparsers,
)


def _cmd_recipes(args: argparse.Namespace) -> None:
    from mispair.methods import list_recipes
    from mispair.nn.heads import list_heads
    from mispair.nn.text import list_text_encoders

    print("recipes:       " + ", ".join(list_recipes()))
    print("heads:         " + ", ".join(list_heads()))
    print("text encoders: " + ", ".join(list_text_encoders()))


def add_parsers(sub: Subparsers) -> None:
    """``mispair recipes``."""
    recipes = sub.add_parser("recipes", help="list the registered recipes, heads and text encoders")
    recipes.set_defaults(run=_cmd_recipes)

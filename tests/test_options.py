"""The one typed validator behind config sections, recipe options and head options."""

import dataclasses
import inspect
from typing import Literal

import pytest

from mispair.cli import main
from mispair.config import load_config
from mispair.errors import ConfigError
from mispair.methods import list_recipes
from mispair.methods.base import build_options, get_recipe
from mispair.nn.heads import HEADS, create_head, list_heads
from mispair.options import build_dataclass, coerce


@dataclasses.dataclass
class _Example:
    rate: float = 0.1
    steps: int = 3
    flag: bool = True
    mode: Literal["a", "b"] = "a"
    mask: bool | Literal["auto"] = "auto"
    epochs: list[int] = dataclasses.field(default_factory=list)
    root: str | None = None


@pytest.mark.parametrize(
    ("value", "hint", "expected"),
    [
        ("1e-3", float, 1e-3),
        (2, float, 2.0),
        (3, int, 3),
        ("b", Literal["a", "b"], "b"),
        (True, bool | Literal["auto"], True),
        ("auto", bool | Literal["auto"], "auto"),
        ([1, 2], list[int], [1, 2]),
        (None, str | None, None),
        ("x", str | None, "x"),
    ],
)
def test_values_that_fit_are_coerced(value, hint, expected):
    result = coerce(value, hint, "k")
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    ("value", "hint", "message"),
    [
        ("abc", float, "k: expected a number, got 'abc'"),
        (float("nan"), float, "got nan"),
        (True, float, "expected a number"),
        (1.5, int, "expected an integer"),
        (True, int, "expected an integer"),
        (1, bool, "expected true or false"),
        ("c", Literal["a", "b"], "k: one of a, b, got 'c'"),
        ("yes", bool | Literal["auto"], "auto"),
        ([1, "x"], list[int], r"k\[1\]: expected an integer"),
        (5, list[int], "expected a list"),
        (None, float, "expected a number"),
        ({"a": 1}, str, "expected a string"),
    ],
)
def test_values_that_do_not_fit_name_the_key(value, hint, message):
    with pytest.raises(ConfigError, match=message):
        coerce(value, hint, "k")


def test_dataclass_unknown_key_and_defaults():
    built = build_dataclass(_Example, {"rate": "2e-2", "epochs": [3]}, "section")
    assert built == _Example(rate=0.02, epochs=[3])
    with pytest.raises(ConfigError, match=r"section\.speed: unknown key \(known: epochs, flag"):
        build_dataclass(_Example, {"speed": 1}, "section")
    with pytest.raises(ConfigError, match="section: expected a mapping"):
        build_dataclass(_Example, [1], "section")


@pytest.mark.parametrize("recipe", list_recipes())
def test_every_recipe_option_is_typed(recipe):
    cls = get_recipe(recipe)
    names = [f.name for f in dataclasses.fields(cls.Options)]
    assert names, recipe
    for name in names:
        with pytest.raises(ConfigError, match=rf"^method\.{name}: "):
            build_options(cls, {name: {"not": "an option value"}})
    with pytest.raises(ConfigError, match=r"^method\.no_such_option: unknown key"):
        build_options(cls, {"no_such_option": 1})


@pytest.mark.parametrize("head", list_heads())
def test_every_head_option_is_typed(head):
    cls = HEADS.get(head)
    if hasattr(cls, "Options"):
        params = [f.name for f in dataclasses.fields(cls.Options)]
    else:
        params = list(inspect.signature(cls.__init__).parameters)[2:]
    assert params or head == "cosine"
    for name in params:
        with pytest.raises(ConfigError, match=rf"^model\.head_options\.{name}: "):
            create_head(head, 16, **{name: {"not": "an option value"}})
    with pytest.raises(ConfigError, match=r"^model\.head_options\.bogus: unknown key"):
        create_head(head, 16, bogus=1)


@pytest.mark.parametrize(
    "override",
    [
        "method.margin=abc",
        "method.hardest=maybe",
        "method.loss=hinge",
        "train.lr=fast",
        "model.head_options={sim_dim: big}",
        "data.noise.rate=[1]",
    ],
)
def test_a_bad_value_on_the_command_line_is_one_line_and_exit_2(override, capsys, tmp_path):
    key = override.split("=")[0].replace("={", "").split("={")[0]
    status = main(["train", "model.head=sgr", override, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1
    assert err.startswith("mispair: error: ") and key.split("=")[0] in err
    assert not (tmp_path / "run").exists()  # found before anything is written


def test_float_options_read_yaml_1_1_exponents():
    config = load_config(None, ["recipe=l2rm", "method.cost_lr=1e-3", "train.lr=5e-4"])
    assert build_options(get_recipe("l2rm"), config.method).cost_lr == 1e-3
    assert config.train.lr == 5e-4

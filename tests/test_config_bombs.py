"""A config is bounded in size (checked before reading), aliases, depth, expansion and overrides."""

from __future__ import annotations

import os
import time
import tracemalloc

import pytest

from mispair.cli import main
from mispair.config import load_config
from mispair.errors import ConfigError, DataError
from mispair.safe_parse import load_json, load_yaml
from tests.audit.test_audit_errors import TINY, _collection, _good_rows
from tests.cli_errors import one_line_error


def _few_aliases_bomb(levels: int = 10, width: int = 4) -> str:
    """``levels·width`` aliases (under the alias bound) that expand to ``width**levels`` values."""
    lines = ['l0: &l0 ["x", "x", "x", "x"]']
    for k in range(1, levels + 1):
        lines.append(f"l{k}: &l{k} [" + ", ".join([f"*l{k - 1}"] * width) + "]")
    return "\n".join(lines) + "\nname: x\n"


def test_few_aliases_that_expand_enormously_are_refused_quickly():
    text = _few_aliases_bomb()
    assert text.count("*") <= 50  # the alias count alone would let it through
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"bomb: expands to more than 100,000 values"):
        load_yaml(text, "bomb")
    assert time.perf_counter() - start < 2


def test_aliases_that_stay_small_are_fine():
    assert load_yaml("a: &a [1, 2]\nb: *a\nc: *a\n", "ok") == {"a": [1, 2], "b": [1, 2], "c": [1, 2]}


@pytest.mark.parametrize("opening", ["[", "{a: "])
def test_deep_nesting_is_refused_without_a_stack_overflow(opening):
    closing = "]" if opening == "[" else "}"
    with pytest.raises(ConfigError, match="nested deeper than 32 levels"):
        load_yaml("a: " + opening * 20_000 + closing * 20_000, "deep")


def test_a_config_file_is_sized_before_it_is_read(tmp_path):
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as handle:
        handle.truncate(10 << 30)  # 10 GB, sparse
    tracemalloc.start()
    with pytest.raises(ConfigError, match=r"huge\.yaml: a config file of 10,737,418,240 bytes"):
        load_config(huge)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1 << 20


def test_a_fifo_config_never_blocks(tmp_path):
    os.mkfifo(tmp_path / "pipe.yaml")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config(tmp_path / "pipe.yaml")
    assert time.perf_counter() - start < 1


def test_overrides_are_bounded_in_number_length_and_expansion():
    with pytest.raises(ConfigError, match="201 key=value overrides"):
        load_config(None, ["train.epochs=1"] * 201)
    with pytest.raises(ConfigError, match="20,012 characters"):
        load_config(None, ["name=" + "x" * 20_007])
    levels = ["&l0 [1, 1, 1, 1]"] + [f"&l{k} [" + ", ".join([f"*l{k - 1}"] * 4) + "]" for k in range(1, 11)]
    with pytest.raises(ConfigError, match=r"override method\.margin: expands to more than 100,000 values"):
        load_config(None, ["method.margin=[" + ", ".join(levels) + "]"])
    small = load_config(None, ["model.head_options={a: &a 1, b: *a}", "model.head=cosine"])
    assert small.model.head_options == {"a": 1, "b": 1}  # a few aliases that stay small are fine


def test_the_cli_refuses_a_bomb_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "bomb.yaml").write_text(_few_aliases_bomb())
    code = main(["train", str(tmp_path / "bomb.yaml"), "--out", str(tmp_path / "run")])
    one_line_error(code, capsys.readouterr().err, "bomb.yaml", "MISPAIR_LIMIT_MAX_CONFIG_NODES")
    assert not (tmp_path / "run").exists()


def test_scorer_options_are_checked_before_the_audit_writes(tmp_path, capsys):
    data = _collection(tmp_path / "c", _good_rows())
    out = tmp_path / "out"
    code = main(["audit", str(data), "--out", str(out), "--quiet", *TINY, "division.scorer_options.bogus=1"])
    one_line_error(code, capsys.readouterr().err, "division.scorer_options")
    assert not out.exists()


def test_deeply_nested_json_is_one_error():
    with pytest.raises(DataError, match=r"run/config\.json: JSON nested deeper than 64 levels"):
        load_json("[" * 100_000 + "]" * 100_000, "run/config.json")
    with pytest.raises(DataError, match="JSON nested deeper than 64"):
        load_json("[" * 70 + "]" * 70, "x")
    assert load_json('{"a": [1, {"b": 2}]}', "x") == {"a": [1, {"b": 2}]}

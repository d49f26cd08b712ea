"""Every whole number a user gives lies in a range that the help text states."""

from __future__ import annotations

import argparse
import time

import pytest

from mispair.ann import IndexSpec
from mispair.cli import build_parser, main
from mispair.config import load_config
from mispair.errors import ConfigError
from mispair.limits import RANGES
from tests.cli_errors import one_line_error


def _ranged_actions():
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        for action in sub._actions:
            if getattr(action.type, "bounds", None):
                yield name, sub, action


def test_every_ranged_option_states_its_range_in_the_help():
    seen = set()
    for name, sub, action in _ranged_actions():
        help_text = " ".join(sub.format_help().split())
        flag = action.option_strings[0]
        assert f"{flag.upper().lstrip('-').replace('-', '_')} " in help_text or flag in help_text
        assert f"(range {action.type.bounds})" in help_text, (name, flag)
        seen.add((name, flag))
    assert {
        ("train", "--nproc"),
        ("audit", "--nproc"),
        ("index", "--nlist"),
        ("index", "--hnsw-m"),
        ("search", "--top-k"),
        ("audit", "--seed"),
        ("index", "--ef-search"),
    } <= seen


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["train", "--nproc", "100000"], "--nproc"),
        (["train", "--nproc", "0"], "--nproc"),
        (["index", "ckpt.pt", "data", "--out", "x", "--nlist", "0"], "--nlist"),
        (["index", "ckpt.pt", "data", "--out", "x", "--nprobe", "99999999"], "--nprobe"),
        (["index", "ckpt.pt", "data", "--out", "x", "--hnsw-m", "1000000000"], "--hnsw-m"),
        (["index", "ckpt.pt", "data", "--out", "x", "--ef-construction", "-5"], "--ef-construction"),
        (["index", "ckpt.pt", "data", "--out", "x", "--ef-search", "10000000"], "--ef-search"),
        (["search", "idx", "q", "--top-k", "0"], "--top-k"),
        (["search", "idx", "q", "--top-k", "1e9"], "--top-k"),
        (["search", "idx", "q", "--rerank", "-1"], "--rerank"),
        (["audit", "data", "--out", "x", "--seed", "-1"], "--seed"),
        (["audit", "data", "--out", "x", "--top", "-1"], "--top"),
        (["inject-noise", "--rate", "0.1", "--out", "x", "--seed", "-3"], "--seed"),
        (["inject-noise", "--rate", "0.1", "--out", "x", "--images", "0"], "--images"),
        (["eval", "ckpt.pt", "--folds", "100000"], "--folds"),
    ],
)
def test_an_out_of_range_number_is_one_line_before_any_work(tmp_path, capsys, monkeypatch, argv, flag):
    monkeypatch.chdir(tmp_path)
    start = time.perf_counter()
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    one_line_error(exit_.value.code, capsys.readouterr().err, f"argument {flag}", "must be")
    assert time.perf_counter() - start < 5 and not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("fields", "flag"),
    [
        ({"m": 10**9}, "--hnsw-m"),
        ({"nlist": 0}, "--nlist"),
        ({"ef_search": -1}, "--ef-search"),
        ({"nprobe": 2_000_000}, "--nprobe"),
    ],
)
def test_a_tampered_index_spec_is_refused(fields, flag):
    low, high = RANGES[flag.lstrip("-").replace("-", "_").replace("hnsw_m", "m")]
    with pytest.raises(ConfigError, match=f"{flag}: a whole number in \\[{low}, {high:,}\\]"):
        IndexSpec.from_dict({"kind": "hnsw", **fields})


@pytest.mark.parametrize("key", ["train.seed", "data.noise.seed"])
def test_negative_seeds_are_refused(key):
    with pytest.raises(ConfigError, match=f"{key}: a whole number in \\[0, 4,294,967,295\\], got -1"):
        load_config(None, [f"{key}=-1"])
    assert load_config(None, [f"{key}=7"]) is not None

"""The command line answers at once: ``--help`` of every command and each refusal of a path that
is not there run without importing torch, pandas, FAISS or any other heavy library (their import
alone takes one to several seconds). Times are measured by ``benchmarks/bench_cli_start.py``;
these tests check what decides them, the modules imported, in a fresh interpreter.

The early refusals repeat the library's own checks; the last tests pin that both say the same."""

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mispair.cli import build_parser, main

HEAVY = ("torch", "pandas", "transformers", "sklearn", "scipy", "matplotlib", "faiss")
HEAVY += ("PIL", "pyarrow", "fastapi", "uvicorn", "open_clip", "timm", "onnxruntime", "jinja2")
LIGHT = ("numpy", "yaml")  # not even these for --help
COMMANDS = sorted(
    next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
)


def run_main(argv: list[str]) -> dict:
    """``mispair ARGV`` through :func:`mispair.cli.main` in a fresh interpreter: its exit status,
    stderr, and the top-level modules it imported."""
    return run_mains([argv])[0]


def run_mains(argvs: list[list[str]]) -> list[dict]:
    """``mispair ARGV`` for each of ``argvs`` in turn in one fresh interpreter: each one's exit
    status, stderr, and the top-level modules imported by then (by it or an earlier one: no heavy
    library among them after the last means none was imported by any, as in an interpreter each;
    the first list to hold one names the command that imported it)."""
    script = textwrap.dedent(
        f"""
        import contextlib, io, json, sys
        from mispair.cli import main
        for argv in {argvs!r}:
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                try:
                    code = main(argv)
                except SystemExit as exc:
                    code = exc.code
            modules = sorted({{name.split(".")[0] for name in sys.modules}})
            print(json.dumps({{"code": code, "err": err.getvalue(), "modules": modules}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    ran = [json.loads(line) for line in done.stdout.splitlines()[-len(argvs) :]]
    assert len(ran) == len(argvs), done.stdout
    return ran


def test_every_command_is_covered():
    assert {"audit", "apply", "train", "search", "serve", "index", "eval"} <= set(COMMANDS)


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_imports_no_heavy_library(command):
    ran = run_main([*command.split(), "--help"])
    assert ran["code"] == 0, ran["err"]
    assert not set(ran["modules"]) & {*HEAVY, *LIGHT}, sorted(set(ran["modules"]) & {*HEAVY, *LIGHT})


def test_building_the_parser_imports_no_heavy_library():
    script = (
        "import json, sys; from mispair.cli import build_parser; build_parser(); "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(done.stdout))
    assert not loaded & {*HEAVY, *LIGHT}, sorted(loaded & {*HEAVY, *LIGHT})


def _refusals(tmp: Path) -> list[tuple[list[str], str]]:
    """Commands refused for a path that is not there, and what the one line says."""
    no = tmp / "no" / "such"
    (tmp / "index").mkdir()
    (tmp / "checkpoint.pt").write_bytes(b"")
    return [
        (["audit", str(no), "--out", str(tmp / "out")], f"{no}: no such file or folder"),
        (["search", str(no), "battery"], f"{no}: no such index (build one"),
        (
            ["search", str(tmp / "index"), "battery"],
            f"{tmp / 'index'}: not a mispair index (no manifest.json)",
        ),
        (["serve", str(no)], f"{no}: no such index"),
        (["train", str(no)], f"{no}: no such config file or collection"),
        (["index", str(no), str(tmp), "--out", str(tmp / "i")], f"{no}: checkpoint not found"),
        (
            ["index", str(tmp / "checkpoint.pt"), str(no), "--out", str(tmp / "i")],
            f"{no}: no such file or folder",
        ),
        (["eval", str(no)], f"{no}: checkpoint not found"),
        (["eval", str(tmp / "checkpoint.pt"), "--index", str(no)], f"{no}: no such index"),
        (["apply", str(no), "--decisions", "d.csv", "--out", str(tmp / "o")], "not a finished audit folder"),
        (["search", str(tmp), "x", "--top-k", "0"], "argument --top-k: must be a whole number"),
        (["serve", str(tmp), "--port", "70000"], "argument --port: must be a whole number in [0, 65,535]"),
    ]


def test_refusals_of_missing_paths_import_no_heavy_library(tmp_path):
    refusals = _refusals(tmp_path)
    for (argv, says), ran in zip(refusals, run_mains([argv for argv, _ in refusals]), strict=True):
        lines = ran["err"].strip().splitlines()
        assert ran["code"] == 2 and len(lines) == 1 and says in lines[0], (argv, ran["err"])
        assert not set(ran["modules"]) & set(HEAVY), (argv, sorted(set(ran["modules"]) & set(HEAVY)))
    assert not (tmp_path / "out").exists() and not (tmp_path / "i").exists()


def test_search_refuses_a_wrong_request_before_it_loads_the_index(tmp_path):
    index = tmp_path / "index"
    index.mkdir()
    (index / "manifest.json").write_text(json.dumps({"format": "mispair-index", "version": 1, "files": {}}))
    refusals = [
        ([str(index)], "give a query text"),
        ([str(index), "a", "--image", "x.png"], "exactly one of them"),
        ([str(index), "--image", str(tmp_path / "x.png")], f"--image {tmp_path / 'x.png'}: no such file"),
        ([str(index), "--queries", str(tmp_path / "q.txt")], f"--queries {tmp_path / 'q.txt'}: no such file"),
        ([str(index), "a", "--top-k", "5", "--rerank", "2"], "--top-k 5: at most --rerank 2"),
        (
            [str(index), "a", "--checkpoint", str(tmp_path / "c.pt")],
            f"{tmp_path / 'c.pt'}: checkpoint not found",
        ),
    ]
    commands = [["search", *argv] for argv, _ in refusals]
    for (argv, says), ran in zip(refusals, run_mains(commands), strict=True):
        lines = ran["err"].strip().splitlines()
        assert ran["code"] == 2 and len(lines) == 1 and says in lines[0], (argv, ran["err"])
        assert not set(ran["modules"]) & set(HEAVY), (argv, sorted(set(ran["modules"]) & set(HEAVY)))


def test_the_package_still_offers_its_names():
    import mispair
    from mispair.data.pairset import PairSet
    from mispair.engine.metrics import retrieval_metrics

    assert mispair.PairSet is PairSet and mispair.retrieval_metrics is retrieval_metrics
    assert callable(mispair.train) and callable(mispair.audit)
    assert set(mispair.__all__) <= set(dir(mispair))
    namespace: dict = {}
    exec("from mispair import *", namespace)
    assert set(mispair.__all__) <= namespace.keys()
    with pytest.raises(AttributeError):
        mispair.no_such_name  # noqa: B018


# --- the early refusals say what the library says --------------------------------------------


def _error(call) -> str:
    from mispair.errors import MispairError

    with pytest.raises(MispairError) as caught:
        call()
    return str(caught.value)


def _cli_error(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err.strip().removeprefix("mispair: error: ")


def test_the_early_refusals_are_the_librarys_words(tmp_path, capsys):
    from mispair.audit.apply import read_decisions
    from mispair.audit.result import AuditResult
    from mispair.data.readers import detect_source
    from mispair.engine.trained import load_checkpoint
    from mispair.search.storage import read_index_folder

    no = tmp_path / "no" / "such"
    assert _cli_error(["audit", f"{no}/", "--out", str(tmp_path / "o")], capsys) == _error(
        lambda: detect_source(f"{no}/")
    )
    assert _cli_error(["eval", str(no)], capsys) == _error(lambda: load_checkpoint(no))
    assert _cli_error(["search", str(no), "q"], capsys) == _error(lambda: read_index_folder(no))
    argv = ["apply", str(tmp_path), "--decisions", str(no), "--out", str(tmp_path / "o")]
    assert _cli_error(argv, capsys) == _error(lambda: AuditResult.load(tmp_path))
    for name in ("summary.json", "pairs.parquet"):
        (tmp_path / name).write_text("")
    assert _cli_error(argv, capsys) == _error(lambda: read_decisions(no, None))

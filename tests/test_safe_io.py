"""A link or a FIFO planted in an output folder is refused, never written through."""

from __future__ import annotations

import os
import time

import pytest

from mispair.atomic import atomic_text, folder_lock
from mispair.cli import main
from mispair.errors import DataError
from mispair.safe_io import open_append, open_lock
from tests.cli_errors import one_line_error
from tests.tiny import TINY_SYNTHETIC_TRAIN

TINY = TINY_SYNTHETIC_TRAIN


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim.txt"
    path.write_text("precious\n")
    return path


@pytest.mark.parametrize("opener", [open_append, open_lock])
def test_a_link_is_never_opened(tmp_path, victim, opener):
    os.symlink(victim, tmp_path / "log.jsonl")
    with pytest.raises(DataError, match=r"log\.jsonl: a symbolic link; .*remove the link"):
        opener(tmp_path / "log.jsonl")
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("opener", [open_append, open_lock])
def test_a_fifo_is_refused_without_blocking(tmp_path, opener):
    os.mkfifo(tmp_path / "log.jsonl")
    start = time.perf_counter()
    with pytest.raises(DataError, match="not a regular file"):
        opener(tmp_path / "log.jsonl")
    assert time.perf_counter() - start < 1


def test_append_creates_and_appends(tmp_path):
    for line in ("a\n", "b\n"):
        with open_append(tmp_path / "log.jsonl") as handle:
            handle.write(line)
    assert (tmp_path / "log.jsonl").read_text() == "a\nb\n"


def test_the_lock_is_never_taken_through_a_link(tmp_path, victim):
    os.symlink(victim, tmp_path / ".mispair.lock")
    with pytest.raises(DataError, match="symbolic link"), folder_lock(tmp_path):
        pass
    assert victim.read_text() == "precious\n"


def test_an_atomic_write_replaces_the_link_not_its_target(tmp_path, victim):
    os.symlink(victim, tmp_path / "metrics.json")
    atomic_text(tmp_path / "metrics.json", "{}\n")
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "metrics.json").is_symlink()


@pytest.mark.parametrize("planted", ["log.jsonl", ".mispair.lock"])
def test_train_refuses_a_planted_link_before_any_work(tmp_path, victim, capsys, planted):
    out = tmp_path / "run"
    out.mkdir()
    os.symlink(victim, out / planted)
    start = time.perf_counter()
    code = main(["train", *TINY, "--out", str(out), "--quiet"])
    one_line_error(code, capsys.readouterr().err, planted, "symbolic link")
    assert time.perf_counter() - start < 15
    assert victim.read_text() == "precious\n"
    assert not (out / "last.pt").exists() and not (out / "best.pt").exists()

"""Issue 64.7: a second ``train`` or ``audit`` into a folder another run holds is refused before
any work (no picture or caption encoded, nothing written into the folder), in one line; the lock
is released when a run ends, whether it succeeded or failed."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

# imported before the clock starts: the refusal is timed, not the imports
import mispair.audit.run
import mispair.engine.run  # noqa: F401
from mispair.atomic import folder_lock
from mispair.cli import main
from tests.cli_errors import one_line_error
from tests.data.readers_forms import write_form

HOLD = """
import sys, time
from mispair.atomic import folder_lock
with folder_lock(sys.argv[1]):
    print("holding", flush=True)
    time.sleep(120)
"""
TINY = ["model.embed_dim=16", "train.epochs=1", "division.folds=2", "division.rounds=1"]


@pytest.fixture
def busy(tmp_path):
    """A folder a second process holds as a running ``train`` or ``audit`` does (its lock)."""
    out = tmp_path / "busy"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        yield out, holder.pid
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("command", ["train", "audit"])
def test_a_second_command_into_a_busy_folder_is_refused_before_any_encoding(
    tmp_path, busy, monkeypatch, capsys, command
):
    out, pid = busy
    cache = tmp_path / "cache"
    monkeypatch.setenv("MISPAIR_CACHE", str(cache))
    collection = write_form("folder-csv", tmp_path / "pictures")
    started = time.monotonic()
    code = main([command, str(collection), "--out", str(out), "--quiet", *TINY])
    elapsed = time.monotonic() - started
    one_line_error(code, capsys.readouterr().err, "in use by another mispair run", f"process {pid}")
    assert elapsed < 5  # 0.01 s on 2 shared cores; before, train encoded every picture first (16 s)
    assert not cache.exists()  # no picture or caption was encoded
    assert sorted(p.name for p in out.iterdir()) == [".mispair.lock"]  # no marker written into it


def test_the_lock_is_released_after_a_run_and_after_a_refused_input(tmp_path):
    run = ["train", "data.source=synthetic", "data.synthetic_images=20", "train.epochs=1", "--quiet"]
    assert main([*run, "--out", str(tmp_path / "done")]) in (0, None)
    with folder_lock(tmp_path / "done"):  # free again
        pass
    (tmp_path / "empty").mkdir()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "captions.csv").write_text("image,caption\nmissing.png,a caption\n", encoding="utf-8")
    assert main(["train", str(bad), "--out", str(tmp_path / "empty"), "--quiet"]) == 2
    with folder_lock(tmp_path / "empty"):  # released after the error
        pass
    assert main(["train", str(bad), "--out", str(tmp_path / "new"), "--quiet"]) == 2
    assert not (tmp_path / "new").exists()  # a refused input leaves no folder behind

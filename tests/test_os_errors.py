"""Operating-system failures (full disk, read-only file system, impossible paths) are one line,
and leave nothing partial behind."""

from __future__ import annotations

import errno
import os

import pandas as pd
import pytest
import torch

from mispair.cli import main
from mispair.errors import DataError
from mispair.safe_io import append_text
from tests.audit.test_audit_errors import TINY as AUDIT_TINY
from tests.audit.test_audit_errors import _collection, _good_rows
from tests.cli_errors import one_line_error
from tests.tiny import TINY_SYNTHETIC_TRAIN

TINY = TINY_SYNTHETIC_TRAIN


def _leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith((".tmp", ".pt")))


def test_a_full_disk_while_saving_a_checkpoint(tmp_path, capsys, monkeypatch):
    def full(obj, handle, *args, **kwargs):
        handle.write(b"half a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    out = tmp_path / "run"
    code = main(["train", *TINY, "--out", str(out), "--quiet"])
    one_line_error(code, capsys.readouterr().err.strip().splitlines()[-1], "No space left on device")
    assert _leftovers(out) == []


def test_a_full_disk_while_appending_leaves_the_log_whole(tmp_path, monkeypatch):
    log = tmp_path / "log.jsonl"
    append_text(log, '{"epoch": 0}\n')
    real = os.write

    def half(fd, data):
        real(fd, bytes(data[:5]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half)
    with pytest.raises(DataError, match=r"log\.jsonl: cannot write \(No space left on device\)"):
        append_text(log, '{"epoch": 1}\n')
    monkeypatch.undo()
    assert log.read_text() == '{"epoch": 0}\n'


def test_a_read_only_file_system(tmp_path, capsys, monkeypatch):
    import tempfile

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    data, out = _collection(tmp_path / "c", _good_rows()), tmp_path / "out"
    code = main(["audit", str(data), "--out", str(out), "--quiet", *AUDIT_TINY])
    one_line_error(code, capsys.readouterr().err, "cannot write", "Read-only file system")
    assert _leftovers(out) == [] and not (out / "report.html").exists()


def test_an_output_path_that_is_a_file(tmp_path, capsys):
    (tmp_path / "taken").write_text("mine")
    code = main(["train", *TINY, "--out", str(tmp_path / "taken"), "--quiet"])
    one_line_error(code, capsys.readouterr().err, "taken", "is a file")
    assert (tmp_path / "taken").read_text() == "mine"


def test_impossible_image_paths_are_refused_rows(tmp_path):
    rows = [
        *_good_rows(),
        ("a" * 300 + ".png", "a name too long"),
        ("/".join(["b" * 200] * 30) + ".png", "a path too long"),
    ]
    data, out = _collection(tmp_path / "c", rows), tmp_path / "out"
    assert main(["audit", str(data), "--out", str(out), "--quiet", *AUDIT_TINY]) == 0
    refused = pd.read_csv(out / "refused.csv", dtype=str, keep_default_na=False)
    assert (
        refused["reason"].tolist()
        == ["an image path longer than the file system allows (4096 bytes, 255 per name)"] * 2
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["audit", "n" * 5000, "--out", "out"],
        ["eval", "n" * 5000 + ".pt"],
        ["train", "n" * 5000],
        ["train", "name=" + "n" * 300, "--out", "n" * 300],
        ["search", "n" * 5000, "a query"],
    ],
)
def test_a_path_too_long_for_the_file_system_is_one_line(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    code = main([*argv, *(["data.source=synthetic", *TINY[1:]] if argv[0] == "train" else [])])
    one_line_error(code, capsys.readouterr().err.strip().splitlines()[-1], "")
    assert not any(tmp_path.iterdir())

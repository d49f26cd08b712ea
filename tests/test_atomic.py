"""Atomic writes: all or nothing, and no temp file left behind."""

import pytest

from mispair.atomic import atomic_text, atomic_write
from mispair.errors import DataError


def test_writes_and_replaces(tmp_path):
    path = tmp_path / "a.txt"
    atomic_text(path, "one")
    atomic_text(path, "two")
    assert path.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_a_failing_writer_keeps_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "a.txt"
    atomic_text(path, "old")

    def half_then_fail(f):
        f.write(b"half")
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        atomic_write(path, half_then_fail)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_os_errors_become_one_line_data_errors(tmp_path):
    with pytest.raises(DataError, match=r"no/such/a\.txt: cannot write \(No such file or directory\)"):
        atomic_text(tmp_path / "no" / "such" / "a.txt", "x")
    (tmp_path / "dir").mkdir()
    with pytest.raises(DataError, match="cannot write"):
        atomic_text(tmp_path / "dir", "x")  # a folder stands where the file should go
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir"]

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


def test_a_link_planted_at_the_destination_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "metrics.json").symlink_to(victim)
    atomic_text(tmp_path / "out" / "metrics.json", "{}")
    assert victim.read_text() == "precious"
    assert not (tmp_path / "out" / "metrics.json").is_symlink()
    assert (tmp_path / "out" / "metrics.json").read_text() == "{}"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["metrics.json"]  # no temp left


def test_one_process_per_folder(tmp_path):
    import os

    from mispair.atomic import folder_lock

    busy = rf"in use by another mispair run \(process {os.getpid()}\)"
    with folder_lock(tmp_path), pytest.raises(DataError, match=busy), folder_lock(tmp_path):
        pass
    with folder_lock(tmp_path):  # released at the end of the block
        pass


def test_a_second_training_into_a_busy_folder_is_one_line_and_exit_2(tmp_path, capsys):
    from mispair.atomic import folder_lock
    from mispair.cli import main

    (tmp_path / "run").mkdir()
    with folder_lock(tmp_path / "run"):
        status = main(
            [
                "train",
                "data.source=synthetic",
                "data.synthetic_images=50",
                "train.epochs=1",
                "--out",
                str(tmp_path / "run"),
                "--quiet",
            ]
        )
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and err[-1].startswith("mispair: error: ") and "in use by another" in err[-1]
    assert not (tmp_path / "run" / "config.json").exists()

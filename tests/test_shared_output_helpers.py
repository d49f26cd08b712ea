"""The shared helpers every writer and every printed line go through: :func:`shown` (a value cut
with "…" and terminal-safe, in time independent of its length), :func:`plain_part` and
:func:`made_parents` (nothing written outside an output folder), :func:`check_outputs` (output
files distinct, never an input, never a link) and :func:`check_text_lines` (a text file bounded
in lines and line length before a parser builds a value)."""

import os
import re
import time
from pathlib import Path

import pytest

from mispair.errors import ConfigError, DataError
from mispair.output_folder import check_outputs
from mispair.safe_io import listed, made_parents, plain_part, shown
from mispair.safe_parse import check_text_lines


def test_shown_cuts_and_escapes():
    assert shown("a dog") == "a dog"
    assert shown("x" * 300) == "x" * 200 + "…"
    assert shown("\x1b[2J\x07\u202e\nmispair: error:") == "\\x1b[2J\\x07\\u202e\\nmispair: error:"
    assert len(shown("\x1b" * 1000, 50)) == 51, "escapes count toward the cut"
    start = time.perf_counter()
    assert shown("y" * 80_000_000, 10) == "y" * 10 + "…"
    assert time.perf_counter() - start < 0.5, "only the first characters are looked at"


def test_listed_counts_what_it_leaves_out():
    assert listed([f"n{k}" for k in range(200)]) == ", ".join(f"n{k}" for k in range(10)) + " and 190 more"
    assert listed(["\x1bname"]) == "\\x1bname"


@pytest.mark.parametrize("name", ["../../x", "..", ".", "", "a/b", "a\\b", "nul\0", "bell\x07", "é" * 200])
def test_a_name_that_is_not_plain_is_refused(name):
    with pytest.raises(DataError, match="not a plain name"):
        plain_part(name, "the split")


@pytest.mark.parametrize("name", ["/etc/passwd", "a/../../b", "a//b", "./a"])
def test_made_parents_stays_inside(tmp_path, name):
    with pytest.raises(DataError):
        made_parents(tmp_path / "out", name)
    assert not (tmp_path / "out").exists()


def test_made_parents_makes_plain_folders(tmp_path):
    assert made_parents(tmp_path, "a/b/c.tar") == tmp_path / "a" / "b" / "c.tar"
    assert (tmp_path / "a" / "b").is_dir()


def test_check_outputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.csv").write_text("mine")
    os.link(tmp_path / "a.csv", tmp_path / "hard.csv")
    (tmp_path / "link.csv").symlink_to(tmp_path / "nowhere.csv")
    assert check_outputs({"--out": "new.csv", "--labels": None}) == {"--out": Path("new.csv")}
    with pytest.raises(ConfigError, match=re.escape("--b x/../a.csv: the same file as --a a.csv")):
        check_outputs({"--a": "a.csv", "--b": "x/../a.csv"}, overwrite=True)
    with pytest.raises(ConfigError, match="the same file as --a"):
        check_outputs({"--a": "a.csv", "--b": "hard.csv"}, overwrite=True)
    with pytest.raises(ConfigError, match=re.escape("the same file as the export a.csv, which it reads")):
        check_outputs({"--out": "./a.csv"}, overwrite=True, inputs={"the export": "a.csv"})
    with pytest.raises(DataError, match="a symbolic link"):
        check_outputs({"--out": "link.csv"}, overwrite=True)
    with pytest.raises(DataError, match="not a regular file"):
        check_outputs({"--out": "."}, overwrite=True)
    with pytest.raises(ConfigError, match="exists; give another file name or --overwrite"):
        check_outputs({"--out": "a.csv"})
    given = check_outputs({"--out": "a.csv", "--decisions": "b.csv"}, overwrite=True)
    assert given == {"--out": Path("a.csv"), "--decisions": Path("b.csv")}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"pair_id,label\n\0\0\0", "not a text file (it holds NUL bytes)"),
        (b"a\n" * 11, "11 rows, more than the 10"),
        (b"short\n" + b"x" * 21 + b"\nshort\n", "a line of more than 20 characters"),
        (b"x" * 21, "a line of more than 20 characters"),
    ],
)
def test_a_text_file_is_bounded_before_it_is_parsed(monkeypatch, data, message):
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_TABLE_ROWS", "10")
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_LINE_CHARS", "20")
    with pytest.raises(DataError, match=re.escape(message)):
        check_text_lines(data, "labels.csv")


def test_lines_are_measured_across_chunks(monkeypatch):
    import mispair.safe_parse as safe_parse

    monkeypatch.setattr(safe_parse, "TEXT_CHUNK_BYTES", 7)
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_LINE_CHARS", "20")
    assert check_text_lines(b"".join(b"y" * (k % 21) + b"\n" for k in range(100)), "x") == 100
    with pytest.raises(DataError):
        check_text_lines(b"ab\n" + b"z" * 21 + b"\nab", "x")

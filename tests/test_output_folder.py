"""mispair writes only into folders it owns, and touches only its own files there."""

from __future__ import annotations

import os

import pytest

from mispair.cli import main
from mispair.errors import DataError
from mispair.output_folder import MARKER, claim_folder
from mispair.search.storage import write_index_folder
from tests.audit.test_audit_errors import TINY, _collection, _good_rows
from tests.cli_errors import one_line_error

OWN = ("summary.json", "run")


def test_a_new_or_empty_folder_is_marked(tmp_path):
    claim_folder(tmp_path / "new", "audit", OWN)
    (tmp_path / "empty").mkdir()
    claim_folder(tmp_path / "empty", "audit", OWN)
    assert (tmp_path / "new" / MARKER).is_file() and (tmp_path / "empty" / MARKER).is_file()


def test_a_foreign_folder_is_refused_and_left_alone(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "thesis.tex").write_text("mine")
    with pytest.raises(
        DataError, match=r"out: a folder that mispair did not create \(it holds 'thesis.tex'\)"
    ):
        claim_folder(tmp_path / "out", "audit", OWN)
    assert sorted(os.listdir(tmp_path / "out")) == ["thesis.tex"]


def test_overwrite_marks_the_folder_and_keeps_other_files(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "thesis.tex").write_text("mine")
    claim_folder(tmp_path / "out", "audit", OWN, overwrite=True)
    claim_folder(tmp_path / "out", "audit", OWN)  # now mispair's: no flag needed
    assert (tmp_path / "out" / "thesis.tex").read_text() == "mine" and (tmp_path / "out" / MARKER).is_file()


def test_a_folder_of_only_mispair_files_is_mispairs(tmp_path):
    (tmp_path / "out" / "run").mkdir(parents=True)
    (tmp_path / "out" / "summary.json").write_text("{}")
    (tmp_path / "out" / ".mispair.lock").write_text("")
    claim_folder(tmp_path / "out", "audit", OWN)


def test_a_linked_folder_or_marker_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(DataError, match="symbolic link"):
        claim_folder(tmp_path / "link", "audit", OWN)
    (tmp_path / "out" / MARKER).mkdir(parents=True)
    with pytest.raises(DataError, match="not a regular file"):
        claim_folder(tmp_path / "out", "audit", OWN)


def test_an_index_rebuild_never_deletes_files_it_did_not_write(tmp_path):
    folder = tmp_path / "photos.index"
    write_index_folder(folder, {}, {"a.npy": b"1"})
    write_index_folder(folder, {}, {"a.npy": b"2"})  # an index alone is replaced
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(DataError, match=r"holds files the index did not write \(e.g. 'notes.txt'\)"):
        write_index_folder(folder, {}, {"a.npy": b"3"})
    assert (folder / "notes.txt").read_text() == "mine" and (folder / "a.npy").read_bytes() == b"2"


def test_audit_refuses_a_foreign_out_then_overwrites_only_its_own_files(tmp_path, capsys):
    data = _collection(tmp_path / "c", _good_rows())
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "summary.json").write_text("my own summary")
    code = main(["audit", str(data), "--out", str(out), "--quiet", *TINY])
    one_line_error(code, capsys.readouterr().err, "did not create", "--overwrite")
    assert sorted(os.listdir(out)) == ["notes.txt", "summary.json"]
    assert main(["audit", str(data), "--out", str(out), "--quiet", "--overwrite", *TINY]) == 0
    assert (out / "notes.txt").read_text() == "mine" and (out / "report.html").is_file()
    assert main(["audit", str(data), "--out", str(out), "--quiet", *TINY]) == 0  # now the audit's folder


def test_train_refuses_a_foreign_out(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    code = main(["train", "data.source=synthetic", *TINY, "--out", str(tmp_path), "--quiet"])
    one_line_error(code, capsys.readouterr().err, "did not create")
    assert os.listdir(tmp_path) == ["notes.txt"]

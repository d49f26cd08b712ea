"""Every file of an index folder is checked before it is read: a FIFO named in the manifest, a
link to ``/dev/zero``, a sparse file of gigabytes, a file larger than the manifest records are
refused at once (no hang, nothing read whole), within 10 s and 500 MB."""

import json
import os

import pytest

from mispair.errors import DataError
from mispair.search.storage import read_index_folder, write_index_folder
from tests.bounded import call, measured


@pytest.fixture
def index(tmp_path):
    write_index_folder(tmp_path / "idx", {"kind": "test"}, {"a.npy": b"x" * 100, "b.json": b"{}"})
    return tmp_path / "idx"


def test_an_index_reads_back(index):
    manifest, files = read_index_folder(index)
    assert files == {"a.npy": b"x" * 100, "b.json": b"{}"} and manifest["sizes"]["a.npy"] == 100


def fifo(path):
    path.unlink()
    os.mkfifo(path)


def dev_zero(path):
    path.unlink()
    os.symlink("/dev/zero", path)


def sparse(path):
    with path.open("r+b") as handle:
        handle.truncate(8 << 30)


def larger(path):
    path.write_bytes(b"x" * 1000)


def sparse_without_sizes(path):
    manifest = json.loads((path.parent / "manifest.json").read_text())
    del manifest["sizes"]
    (path.parent / "manifest.json").write_text(json.dumps(manifest))
    sparse(path)


CASES = {
    "a FIFO": (fifo, "not a regular file"),
    "a link to /dev/zero": (dev_zero, "symbolic link"),
    "a sparse 8 GB file": (sparse, "more than the 100"),
    "a file larger than recorded": (larger, "more than the 100"),
    "a sparse file, an index without sizes": (sparse_without_sizes, "more than the 1,000,000"),
    "the manifest a FIFO": (lambda p: fifo(p.parent / "manifest.json"), "not a regular file"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_index_file_is_refused_before_it_is_read(index, case):
    change, message = CASES[case]
    change(index / "a.npy")
    code = call("mispair.search.storage", "read_index_folder", str(index))
    run = measured(code, timeout=30, env={"MISPAIR_LIMIT_MAX_INDEX_FILE_BYTES": "1000000"})
    assert run.code == 2 and message in run.stderr, run.stderr
    assert run.seconds < 10 and run.peak_mb < 500, (run.seconds, run.peak_mb)


def test_a_manifest_naming_a_file_outside_is_refused(index):
    manifest = json.loads((index / "manifest.json").read_text())
    manifest["files"]["../x"] = "0" * 64
    (index / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="outside the index"):
        read_index_folder(index)

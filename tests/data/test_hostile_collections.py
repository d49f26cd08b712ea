"""Collections someone else wrote: embedding paths confined like picture paths (class 5), and
each bounded reader refusing its bomb within 10 s and 500 MB, measured in a fresh process
(class 3)."""

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mispair.data.readers.embeddings import embedding_cells
from mispair.errors import DataError
from tests.bounded import call, measured


def npy(path: Path, array: np.ndarray) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, array)
    return str(path)


@pytest.mark.parametrize("where", ["traversing", "absolute", "a link out"])
def test_an_embedding_path_outside_the_collection_is_refused(tmp_path, where):
    base = tmp_path / "collection"
    npy(base / "e" / "0.npy", np.ones(4, np.float32))
    secret = npy(tmp_path / "secret.npy", np.ones(4, np.float32))
    cell = {"traversing": "../secret.npy", "absolute": secret, "a link out": "e/link.npy"}[where]
    os.symlink(secret, base / "e" / "link.npy")
    cells = pd.Series(["e/0.npy", cell])
    with pytest.raises(DataError, match="outside the collection"):
        embedding_cells(cells, pd.Series(["a", "b"]), base, "emb", "t.csv")
    assert embedding_cells(cells[:1], pd.Series(["a"]), base, "emb", "t.csv")[0].shape == (4,)


def test_a_deeply_nested_embedding_cell_is_one_error(tmp_path):
    cells = pd.Series(["[" * 100_000 + "]" * 100_000])
    with pytest.raises(DataError, match=r"nested too deep|not a vector"):
        embedding_cells(cells, pd.Series(["a"]), tmp_path, "emb", "t.csv")


def npy_header_bomb(path: Path) -> Path:
    """A 128-byte ``.npy`` whose header declares 37 GB of float32."""
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.float32))
    header["shape"] = (9_250_000_000,)
    with path.open("wb") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        handle.write(b"\0" * 64)
    return path


def within_budget(code: str, message: str, **env: str) -> None:
    run = measured(code, timeout=60, env=env)
    assert run.code == 2 and message in run.stderr, run.stderr[-2000:]
    assert run.seconds < 10 and run.peak_mb < 500, (run.seconds, run.peak_mb)


def test_a_npy_header_declaring_37_gb_is_refused_before_reading(tmp_path):
    bomb = npy_header_bomb(tmp_path / "bomb.npy")
    within_budget(call("mispair.data.precomp", "load_npy", str(bomb)), "more than the")
    with pytest.raises(DataError, match="more than the"):
        embedding_cells(pd.Series(["bomb.npy"]), pd.Series(["a"]), tmp_path, "emb", "t.csv")


def test_a_npy_header_larger_than_its_file_is_truncated_even_when_mapped(tmp_path):
    from mispair.data.precomp import load_npy

    with pytest.raises(DataError, match="truncated"):
        load_npy(npy_header_bomb(tmp_path / "bomb.npy"), mmap=True)

"""``mispair search`` reads its queries as the readers read captions: strict UTF-8 (standard input
as bytes, an argument's undecodable bytes) and cut to ``MAX_TEXT_CHARS`` before tokenizing; a
30 MB line costs the bound in memory (issue 58, class 5)."""

import io
import json
import tracemalloc

import pytest

pytest.importorskip("faiss")

from mispair.limits import limit
from mispair.search import Index
from mispair.search.queries import cut_queries, query_texts
from tests.cli_errors import one_line_error

from .conftest import run_cli


@pytest.fixture(scope="module")
def index_dir(test_split_index):
    return test_split_index


def test_binary_standard_input_is_one_line(index_dir, monkeypatch):
    binary = bytes(range(256)) * 40
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(binary), encoding="latin-1"))
    code, _, err = run_cli("search", index_dir, "--queries", "-")
    one_line_error(code, err, "standard input: not UTF-8 text")


def test_an_argument_that_is_not_utf8_is_one_line(index_dir):
    argument = b"caf\xe9 kalone".decode("utf-8", "surrogateescape")  # what Python makes of argv
    code, _, err = run_cli("search", index_dir, "kalone", argument)
    one_line_error(code, err, "query 2: not UTF-8 text")
    code, _, err = run_cli("search", index_dir, argument)
    one_line_error(code, err, "query: not UTF-8 text")


def test_a_long_query_is_cut_and_finds_what_the_cut_text_finds(index_dir):
    bound = limit("MAX_TEXT_CHARS")
    long = "kalone near a red apple " * 50_000  # 1.2 MB
    with pytest.warns(UserWarning, match=f"the query texts: 1 caption.s. longer than {bound} characters"):
        code, got, err = run_cli("search", index_dir, long, "--json", "--top-k", "5")
    assert code == 0, err
    code, expected, err = run_cli("search", index_dir, long[:bound], "--json", "--top-k", "5")
    assert (code, err) == (0, "")
    assert json.loads(got) == json.loads(expected)
    assert json.loads(got)["query"] == long[:bound]


def test_the_api_cuts_a_query_as_the_command_line_does(index_dir):
    index = Index.load(index_dir)
    long = "near kalone " * 1000
    assert index.search_texts([long], k=4) == index.search_texts([long[: limit("MAX_TEXT_CHARS")]], k=4)
    with pytest.raises(Exception, match="not UTF-8 text"):
        index.search_texts(["\ud800 kalone"])


def test_a_30_mb_line_is_read_a_bounded_piece_at_a_time(tmp_path):
    bound = limit("MAX_TEXT_CHARS")
    file = tmp_path / "queries.txt"
    with file.open("w", encoding="utf-8") as handle:
        handle.write("first\n")
        handle.write("é" * 15_000_000 + "\n")  # 30 MB of UTF-8
        handle.write("last\r\n")
    tracemalloc.start()
    with pytest.warns(UserWarning, match="1 caption"):
        texts = list(query_texts([], str(file)))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert texts == ["first", "é" * bound, "last"]
    assert peak < 8 << 20, peak


def test_cut_queries_counts_and_names_what_it_refuses():
    bound = limit("MAX_TEXT_CHARS")
    assert cut_queries(["a" * (bound + 5), "b"]) == (["a" * bound, "b"], 1)
    with pytest.raises(Exception, match=r"^query 2: not UTF-8 text"):
        cut_queries(["fine", "x\udcff"])

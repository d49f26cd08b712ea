"""``mispair search INDEX QUERY [QUERY ...]`` and ``--queries FILE``: many texts from one loaded
index, the same hits as one search each (:meth:`Index.search` against :meth:`Index.search_texts`);
``--json`` prints the query as given (JSON lines for several); a caption's control characters
never reach the terminal raw."""

import io
import json
import shutil

import pytest

pytest.importorskip("faiss")

from mispair.search import Hit, Index, hits_table
from mispair.search.terminal import json_text, printable
from tests.cli_errors import one_line_error

from .conftest import run_cli

ESCAPES = "\x1b[2J\x1b]0;owned\x07\x9b31m\u202e"


@pytest.fixture(scope="module")
def index_dir(test_split_index):
    return test_split_index


@pytest.fixture(scope="module")
def queries(collection):
    captions = (collection / "test_caps.txt").read_text().splitlines()
    return [captions[3], captions[57], "kalone near", captions[121]]


def _same_hits(printed: list[dict], expected: list[Hit]) -> None:
    assert [{**h, "score": None} for h in printed] == [{**h.to_dict(), "score": None} for h in expected]
    assert [h["score"] for h in printed] == pytest.approx([h.score for h in expected], rel=1e-5)


def test_search_texts_finds_what_one_search_each_finds(index_dir, queries):
    index = Index.load(index_dir)
    for rerank, k in ((0, 7), (12, 5)):
        found = index.search_texts(queries, k=k, rerank=rerank)
        for text, hits in zip(queries, found):
            _same_hits([h.to_dict() for h in hits], index.search(text, k=k, rerank=rerank))
    assert index.search_texts([], k=3) == []


def test_many_queries_print_json_lines_of_the_apis_hits(index_dir, queries):
    code, stdout, err = run_cli("search", index_dir, *queries, "--top-k", "5", "--json")
    assert code == 0, err
    lines = stdout.splitlines()
    assert len(lines) == len(queries)
    index = Index.load(index_dir)
    for line, text in zip(lines, queries):
        printed = json.loads(line)
        assert printed["query"] == text and printed["results"] == "images"
        _same_hits(printed["hits"], index.search(text, k=5))


def test_one_query_prints_its_plain_text_in_json(index_dir):
    text = 'kalone\'s "near" one'
    code, stdout, err = run_cli("search", index_dir, text, "--top-k", "2", "--json")
    assert code == 0, err
    assert json.loads(stdout)["query"] == text  # one indented object, the text as given
    assert stdout.startswith("{\n")


def test_a_queries_file_and_stdin_give_the_same_lines(index_dir, queries, tmp_path, monkeypatch):
    code, expected, err = run_cli("search", index_dir, *queries, "--json")
    assert code == 0, err
    file = tmp_path / "queries.txt"
    file.write_text(f"{queries[1]}\r\n\n   \n{queries[2]}\n{queries[3]}", encoding="utf-8")
    code, stdout, err = run_cli("search", index_dir, queries[0], "--queries", file, "--json")
    assert (code, stdout) == (0, expected), err
    monkeypatch.setattr("sys.stdin", io.StringIO(file.read_text()))
    code, stdout, err = run_cli("search", index_dir, queries[0], "--queries", "-", "--json")
    assert (code, stdout) == (0, expected), err
    file.write_text(queries[1])  # one query from a file: still JSON lines
    code, stdout, err = run_cli("search", index_dir, "--queries", file, "--json")
    assert code == 0 and len(stdout.splitlines()) == 1 and json.loads(stdout)["query"] == queries[1]


def test_many_queries_print_one_table_each(index_dir, queries):
    code, stdout, err = run_cli("search", index_dir, *queries[:2], "--top-k", "3")
    assert code == 0, err
    tables = stdout.split("\n\n")
    assert len(tables) == 2
    for table, text in zip(tables, queries):
        lines = table.splitlines()
        assert lines[0] == f"images for {text!r} (exact flat)" and len(lines) == 5


def test_a_bad_query_among_many_is_one_line(index_dir, queries, tmp_path):
    code, _, err = run_cli("search", index_dir, queries[0], "  ")
    one_line_error(code, err, "the query text is empty")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    code, _, err = run_cli("search", index_dir, "--queries", tmp_path / "latin1.txt")
    one_line_error(code, err, "latin1.txt: not UTF-8 text")


# --- control characters ---------------------------------------------------------------------


def test_printable_escapes_what_acts_on_a_terminal():
    assert printable("a red apple") == "a red apple"
    assert printable("café 🍎 naïve") == "café 🍎 naïve"  # text is kept
    assert printable("zero\u200dwidth joiner") == "zero\u200dwidth joiner"  # emoji sequences too
    escaped = printable(f"x{ESCAPES}\n\t\r\x00\x7f\u2028y")
    assert escaped == r"x\x1b[2J\x1b]0;owned\x07\x9b31m\u202e\n\t\r\x00\x7f\u2028y"
    assert escaped.isprintable() and escaped.isascii()


def test_the_table_escapes_control_characters_of_the_collection():
    hit = Hit(1, 0.5, 0, f"img{ESCAPES}", "test", f"a caption{ESCAPES}\nsecond line")
    table = hits_table([hit], "title")
    assert all(line.isprintable() for line in table.splitlines())
    assert len(table.splitlines()) == 3 and r"a caption\x1b[2J" in table


def test_search_never_prints_a_captions_escape_sequence(collection, cosine_checkpoint, tmp_path):
    copy = shutil.copytree(collection, tmp_path / "escapes_precomp")
    captions = (copy / "test_caps.txt").read_text().splitlines()
    captions[0] = f"{captions[0]} {ESCAPES}"
    (copy / "test_caps.txt").write_text("\n".join(captions) + "\n")
    out = tmp_path / "escapes.index"
    code, _, err = run_cli("index", cosine_checkpoint, copy, "--out", out, "--split", "test", "--quiet")
    assert code == 0, err
    code, stdout, err = run_cli("search", out, captions[0], "--top-k", "40")
    assert code == 0, err
    assert "\x1b" not in stdout and "\x9b" not in stdout and "\u202e" not in stdout
    assert r"\x1b[2J" in stdout  # the caption is shown, escaped
    code, stdout, err = run_cli("search", out, captions[0], "--top-k", "40", "--json")
    assert code == 0, err
    assert all(ch.isprintable() or ch == "\n" for ch in stdout)
    assert captions[0] in [hit["caption"] for hit in json.loads(stdout)["hits"]]  # as it is


def test_json_text_is_the_same_json_with_nothing_raw():
    value = {"caption": f"a{ESCAPES}\u2028b", "n": [1, 2.5, None], "text": "café 🍎"}
    text = json_text(value)
    assert json.loads(text) == value and all(ch.isprintable() for ch in text)
    assert "café 🍎" in json_text(value, indent=2)

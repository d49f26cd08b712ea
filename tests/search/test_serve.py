"""``mispair serve``: an index's searches over HTTP on the loopback, checked with a real client
(urllib) against :meth:`Index.search`; the server in a thread (:func:`running`) and the command
itself in a subprocess; a missing FastAPI or a port in use is one line."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("faiss")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from mispair.search import Index
from mispair.search.serve import running
from tests.cli_errors import one_line_error

from .conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def index_dir(test_split_index):
    return test_split_index


@pytest.fixture(scope="module")
def queries(collection):
    captions = (collection / "test_caps.txt").read_text().splitlines()
    return [captions[8], "kalone near", captions[77]]


def _get(url: str) -> tuple[int, object]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _post(url: str, body: object) -> tuple[int, object]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    return _get(request)  # type: ignore[arg-type]


def _expected(index: Index, text: str, k: int, rerank: int = 0) -> dict:
    hits = [h.to_dict() for h in index.search(text, k=k, rerank=rerank)]
    return {"query": text, "results": "images", "hits": hits}


def _same(answer: dict, expected: dict) -> None:
    assert {**answer, "hits": None} == {**expected, "hits": None}
    got, want = answer["hits"], expected["hits"]
    assert [{**h, "score": None} for h in got] == [{**h, "score": None} for h in want]
    assert [h["score"] for h in got] == pytest.approx([h["score"] for h in want], rel=1e-5)


def test_the_server_answers_what_the_index_finds(index_dir, queries):
    index = Index.load(index_dir)
    with running(Index.load(index_dir)) as url:
        assert url.startswith("http://127.0.0.1:")
        status, health = _get(f"{url}/health")
        assert status == 200 and health["status"] == "ok"
        assert (health["images"], health["captions"], health["index"]) == (40, 200, str(index_dir))
        for text in queries:
            status, answer = _get(f"{url}/search?{urllib.parse.urlencode({'q': text, 'k': 5})}")
            assert status == 200
            _same(answer, _expected(index, text, 5))
        status, answer = _get(f"{url}/search?q=kalone&k=3&rerank=8")
        assert status == 200
        _same(answer, _expected(index, "kalone", 3, 8))
        status, answers = _post(f"{url}/search?k=4", queries)
        assert status == 200 and len(answers) == len(queries)
        for answer, text in zip(answers, queries):
            _same(answer, _expected(index, text, 4))
        assert _post(f"{url}/search", []) == (200, [])


def test_the_server_refuses_a_wrong_request_and_goes_on(index_dir):
    with running(Index.load(index_dir)) as url:
        status, answer = _get(f"{url}/search?q=kalone&k=5&rerank=2")
        assert status == 400 and answer["error"].startswith("--top-k 5: at most --rerank 2")
        status, answer = _get(f"{url}/search?q=%20")
        assert status == 400 and answer["error"] == "the query text is empty"
        assert _get(f"{url}/search?q=kalone&k=0")[0] == 422
        assert _get(f"{url}/search")[0] == 422
        assert _post(f"{url}/search", {"not": "a list"})[0] == 422
        assert _get(f"{url}/search?q=kalone&k=1")[0] == 200  # still serving


def test_queries_in_parallel_get_their_own_answers(index_dir, queries):
    index = Index.load(index_dir)
    expected = {text: _expected(index, text, 5) for text in queries}
    answers: dict[str, object] = {}
    with running(Index.load(index_dir)) as url:

        def ask(text: str) -> None:
            answers[text] = _get(f"{url}/search?{urllib.parse.urlencode({'q': text, 'k': 5})}")

        threads = [threading.Thread(target=ask, args=(t,)) for t in queries * 3]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    for text in queries:
        status, answer = answers[text]  # type: ignore[misc]
        assert status == 200
        _same(answer, expected[text])


def test_mispair_serve_answers_then_stops_on_ctrl_c(index_dir):
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    server = subprocess.Popen(
        [sys.executable, "-m", "mispair", "serve", str(index_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        first = _first_line(server, timeout=120)
        assert first.startswith("serving exact flat index of 40 images"), first
        assert first.endswith("(loopback only: this machine's programs, no one on the network)")
        url = first.split(" at ")[1].split()[0]
        status, health = _get(f"{url}/health")
        assert status == 200 and health["images"] == 40
        status, answer = _get(f"{url}/search?q=kalone&k=2")
        assert status == 200 and [h["rank"] for h in answer["hits"]] == [1, 2]
        for _ in range(20):  # bad requests of every kind: none is a log line
            assert _get(f"{url}/search?q=kalone&k=0")[0] == 422
            assert _post(f"{url}/search", ["\ud800"])[0] == 400
            parts = urllib.parse.urlsplit(url)
            with socket.create_connection((parts.hostname, parts.port)) as raw:
                raw.sendall(b"NOT HTTP\r\n\r\n")
                assert raw.recv(100).startswith(b"HTTP/1.1 400")
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=60) == 0
        rest = server.stderr.read().strip().splitlines()  # type: ignore[union-attr]
        assert rest[0].startswith("GET /search?q=TEXT") and rest[1:] == ["stopped"], rest
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=30)


def _first_line(process: subprocess.Popen, timeout: float) -> str:
    """The first line the process writes to stderr (a reader thread: bounded, never blocks)."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stderr.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert lines and lines[0], f"no line in {timeout} s (exit status {process.poll()})"
    return lines[0].strip()


def test_a_missing_fastapi_is_one_line_naming_the_extra(index_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "fastapi", None)  # import fastapi fails as when not installed
    code, _, err = run_cli("serve", index_dir)
    one_line_error(code, err, "mispair serve needs FastAPI and uvicorn", "pip install 'mispair[serve]'")


def test_a_port_in_use_is_one_line(index_dir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        code, _, err = run_cli("serve", index_dir, "--port", port)
    one_line_error(code, err, f"--host 127.0.0.1 --port {port}: cannot listen there")
    assert time.monotonic() - started < 60
    code, _, err = run_cli("serve", index_dir, "--host", "no such host.invalid")
    one_line_error(code, err, "--host no such host.invalid: not an address to listen on")

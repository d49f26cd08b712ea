"""``mispair serve`` serves its user only and no client exhausts it (issue 58, class 2), checked
with real clients over the loopback: a foreign ``Host`` (DNS rebinding) is refused, a body above
the bound is refused however it is sent without the server holding it, a client that trickles
its headers or holds connections is cut off within the server's bounds, and every bad request is
a 4xx answer ``{"error": ...}`` of one line."""

import contextlib
import json
import socket
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("faiss")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from mispair.limits import limit
from mispair.search import Index
from mispair.search import serve as served
from mispair.search.serve import running
from mispair.search.serve_guard import allowed_hosts, host_name


@pytest.fixture(scope="module")
def index(test_split_index):
    return Index.load(test_split_index)


@pytest.fixture
def tight(monkeypatch):
    """Small bounds, so that a test meets them in a second."""
    monkeypatch.setattr(served, "MAX_BODY", 1 << 20)
    monkeypatch.setattr(served, "REQUEST_SECONDS", 1.0)
    monkeypatch.setattr(served, "MAX_CONNECTIONS", 8)


def _address(url: str) -> tuple[str, int]:
    parsed = urllib.parse.urlsplit(url)
    return parsed.hostname or "", parsed.port or 80


def _exchange(url: str, request: bytes, timeout: float = 30) -> tuple[int, dict]:
    """Send raw ``request`` bytes; the answer's status and JSON body."""
    with socket.create_connection(_address(url), timeout=timeout) as sock:
        sock.sendall(request)
        return _answer(sock)


def _answer(sock: socket.socket) -> tuple[int, dict]:
    data = b""
    while b"\r\n\r\n" not in data or len(data) < _expected_size(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"content-type: application/json" in head.lower(), head
    assert b"\n" not in body.strip(), body  # one line
    return status, json.loads(body)


def _expected_size(data: bytes) -> int:
    head, _, _ = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(head) + 4 + int(line.split(b":")[1])
    return len(data) + 1


def _get(path: str, host: str = "127.0.0.1") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()


def _post(body: bytes, host: str = "127.0.0.1") -> bytes:
    return (
        f"POST /search?k=2 HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_foreign_host_is_refused_and_the_allowed_names_answer(index):
    with running(index, allow_hosts=["search.lan"]) as url:
        port = _address(url)[1]
        status, answer = _exchange(url, _get("/health", f"evil.example:{port}"))
        assert status == 421 and answer["error"].startswith("Host 'evil.example': this server answers only")
        assert _exchange(url, _get("/search?q=kalone", "attacker.test"))[0] == 421
        assert _exchange(url, b"GET /health HTTP/1.0\r\n\r\n")[0] == 421  # no Host at all
        for name in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}", "search.lan"):
            status, answer = _exchange(url, _get("/health", name))
            assert (status, answer["status"]) == (200, "ok"), name


def test_the_allow_list_and_host_names():
    assert allowed_hosts("127.0.0.1") == ["127.0.0.1", "localhost", "::1"]
    assert allowed_hosts("0.0.0.0", ["Photos.LAN"]) == ["127.0.0.1", "localhost", "::1", "photos.lan"]
    assert allowed_hosts("192.168.1.5") == ["127.0.0.1", "localhost", "::1", "192.168.1.5"]
    assert [host_name(h) for h in ("a.b:80", "[::1]:8000", "::1", "X.Y")] == ["a.b", "::1", "::1", "x.y"]


def test_a_chunked_body_above_the_bound_is_refused_without_being_held(index, tight):
    with running(index) as url:
        before = _rss_mb()
        with socket.create_connection(_address(url), timeout=30) as sock:
            sock.sendall(
                b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            answers: list[tuple[int, dict]] = []
            reader = threading.Thread(target=lambda: answers.append(_answer(sock)))
            reader.start()
            chunk = b"[" + b" " * 65533 + b"]"
            with contextlib.suppress(OSError):  # the server may close as we send
                for _ in range(64 * 16):  # 64 MB, 64 times the bound
                    sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            reader.join(30)
        grown = _rss_mb() - before
        assert answers and answers[0][0] == 413, answers
        assert answers[0][1] == {"error": f"a request body holds at most {1 << 20} bytes"}
        assert grown < 32, f"the server grew by {grown:.0f} MB on a 64 MB body"
        status, answer = _exchange(url, _post(json.dumps(["kalone"]).encode()))
        assert status == 200 and answer[0]["query"] == "kalone"  # still serving


def test_a_declared_length_above_the_bound_is_refused_at_once(index, tight):
    with running(index) as url, socket.create_connection(_address(url), timeout=30) as sock:
        sock.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999999\r\n\r\n[")
        status, answer = _answer(sock)
        assert status == 413 and "at most 1048576 bytes" in answer["error"]


def test_a_slow_client_is_cut_off_within_the_request_time(index, tight):
    with running(index) as url:
        started = time.monotonic()
        with socket.create_connection(_address(url), timeout=30) as trickling:
            trickling.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            with contextlib.suppress(OSError):
                while time.monotonic() - started < 20:
                    trickling.sendall(b"X")  # a header that never ends
                    time.sleep(0.2)
        assert time.monotonic() - started < 5, "the trickling client was not cut off"
        with socket.create_connection(_address(url), timeout=30) as silent:
            started = time.monotonic()
            assert silent.recv(1) == b""  # connected and said nothing: closed
            assert time.monotonic() - started < 5
        assert _exchange(url, _get("/health"))[0] == 200


def test_connections_past_the_bound_are_closed_as_they_come(index, tight):
    with running(index) as url:
        held = [socket.create_connection(_address(url), timeout=5) for _ in range(8)]
        time.sleep(0.3)
        with socket.create_connection(_address(url), timeout=5) as extra, contextlib.suppress(OSError):
            assert extra.recv(1) == b""
        for sock in held:
            sock.close()
        time.sleep(0.3)
        assert _exchange(url, _get("/health"))[0] == 200


@pytest.mark.parametrize(
    ("request_bytes", "status", "fragment"),
    [
        (_post(b'["\\ud800 kalone"]'), 400, "query: not UTF-8 text"),
        (_post(b'["kalone", "\\udfff"]'), 400, "query 2: not UTF-8 text"),
        (_post(b'["kalone"'), 400, "the request body: not valid JSON"),
        (_post(b"\xff\xfe"), 400, "the request body: not valid JSON"),
        (_post(b"[" * 100_000), 400, "nested deeper than"),
        (_post(b'{"q": "kalone"}'), 422, "a JSON list of query texts"),
        (_post(b"[1, 2]"), 422, "a JSON list of query texts"),
        (_get("/search?q=kalone&k=zero"), 422, "k: Input should be a valid integer"),
        (_get("/search?k=3"), 422, "q: Field required"),
        (_get("/nowhere"), 404, "Not Found"),
        (b"NOT HTTP AT ALL\r\n\r\n", 400, "not a request this server reads"),
        (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX: \x00\r\n\r\n", 400, "not a request this server reads"),
    ],
)
def test_every_bad_request_is_a_4xx_json_line(index, request_bytes, status, fragment):
    with running(index) as url:
        got, answer = _exchange(url, request_bytes)
        assert got == status and fragment in answer["error"], answer
        assert list(answer) == ["error"]


def test_a_long_query_is_cut_before_it_is_searched(index):
    bound = limit("MAX_TEXT_CHARS")
    long = "kalone near " * 800_000  # 9.6 MB, under the body bound
    with running(index) as url:
        status, answers = _exchange(url, _post(json.dumps([long]).encode()))
        short = long[: 60_000 // 12 * 12]  # a GET within the header bound
        assert _exchange(url, _get(f"/search?k=2&q={urllib.parse.quote(short)}"))[1]["query"] == long[:bound]
    assert status == 200 and answers[0]["query"] == long[:bound]
    expected = [h.to_dict() for h in index.search_texts([long[:bound]], k=2)[0]]
    assert [h["image"] for h in answers[0]["hits"]] == [h["image"] for h in expected]
    assert [h["score"] for h in answers[0]["hits"]] == pytest.approx([h["score"] for h in expected], rel=1e-5)

"""The cases of ``hostile_inputs.py`` for ``mispair serve`` and ``mispair search`` input (issue 58,
classes 2 and 5): a server that answers anyone who reaches it or is exhausted by one client, and
query texts that are not text, or are megabytes long. docs/reliability.md states the promise each
case checks.

A server case is a probe in a fresh process (``python benchmarks/hostile_serve.py PROBE INDEX``):
it starts ``mispair serve INDEX --port 0``, plays one hostile client over the loopback, checks
the server's answer, its memory and its log, stops it with Ctrl+C and prints ``probe ok: ...``
(exit 0) or ``probe FAILED: ...`` (exit 1). The launcher of hostile_inputs.py counts the server's
peak memory with the probe's (the probe waits for it).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve()
STOP_SECONDS = 60


def cases(tmp: Path, f, Case, mispair, small: list[str], audit: list[str]) -> list:
    """Every case of classes 58.2 and 58.5 (``f``: the shared fixtures of hostile_inputs.py)."""
    return [*_server_cases(f, Case), *_input_cases(tmp, f, Case, mispair)]


# --- 58.2 serve: for its user only, not exhausted by one client ---------------------------------


def _server_cases(f, Case) -> list:
    kind = "58.2 serve"
    rows = [
        ("a page of another site (DNS rebinding: Host evil.example)", "foreign-host"),
        ("a 64 MB chunked body (bound 10 MB)", "chunked-body"),
        ("a declared Content-Length of 100 GB", "declared-body"),
        ("headers trickled a byte at a time (slowloris)", "slow-headers"),
        ("300 idle connections at once", "idle-connections"),
        ("a lone surrogate in a JSON query", "surrogate"),
        ("a 9.5 MB query text (cut before tokenizing)", "long-query"),
        ("500 malformed requests (the log does not grow)", "log-flood"),
    ]
    return [
        Case(kind, f"serve: {name}", [sys.executable, str(HERE), probe, str(f.index)], "ok", "probe ok")
        for name, probe in rows
    ]


# --- 58.5 search input: text, bounded -------------------------------------------------------------


def _input_cases(tmp: Path, f, Case, mispair) -> list:
    kind = "58.5 search input"
    binary, long_line, huge_stdin = tmp / "s58-binary.bin", tmp / "s58-long.txt", tmp / "s58-huge.txt"

    def write_binary() -> None:
        binary.write_bytes(bytes(range(256)) * 4000)

    def write_long() -> None:
        long_line.write_text("a red apple " * 100_000 + "\n", encoding="utf-8")  # 1.2 MB

    def write_huge() -> None:
        with huge_stdin.open("w", encoding="utf-8") as handle:
            for _ in range(3):
                handle.write("kalone " * 1_500_000 + "\n")  # three 10.5 MB lines

    search = mispair("search", f.index)
    return [
        Case(
            kind,
            "search: binary standard input",
            ["/bin/sh", "-c", f'exec "$@" < {binary}', "sh", *search, "--queries", "-"],
            "error",
            "standard input: not UTF-8 text",
            setup=write_binary,
        ),
        Case(
            kind,
            "search: an argument that is not UTF-8 (byte 0xE9)",
            [*search, "caf\udce9 au lait"],
            "error",
            "query: not UTF-8 text",
        ),
        Case(
            kind,
            "search: a 1.2 MB query line (cut to 1000 characters)",
            [*search, "--queries", long_line],
            "warn",
            "1 caption(s) longer than 1000 characters were cut",
            setup=write_long,
        ),
        Case(
            kind,
            "search: three 10.5 MB lines on standard input",
            ["/bin/sh", "-c", f'exec "$@" < {huge_stdin}', "sh", *search, "--queries", "-", "--json"],
            "warn",
            "3 caption(s) longer than 1000 characters were cut",
            setup=write_huge,
        ),
    ]


# --- the probes --------------------------------------------------------------------------------


class Server:
    """``mispair serve INDEX --port 0`` in a subprocess: its URL, its memory, its log."""

    def __init__(self, index: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mispair.cli", "serve", index, "--port", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 120
        while not self.lines and time.monotonic() < deadline and self.process.poll() is None:
            time.sleep(0.05)
        if not self.lines:
            raise SystemExit(f"probe FAILED: the server did not start (exit {self.process.poll()})")
        url = self.lines[0].split(" at ")[1].split()[0]
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.address = (host, int(port))

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) / 1024

    def stop(self) -> list[str]:
        """Ctrl+C; the lines it logged after its two start-up lines, before "stopped"."""
        self.process.send_signal(signal.SIGINT)
        self.process.wait(STOP_SECONDS)
        self.reader.join(10)
        return [line for line in self.lines[2:] if line != "stopped"]


def exchange(address: tuple[str, int], request: bytes, timeout: float = 30) -> tuple[int, dict]:
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(request)
        return answer(sock)


def answer(sock: socket.socket) -> tuple[int, dict]:
    data = b""
    while chunk := sock.recv(1 << 16):
        data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        sizes = [
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ]
        if sizes and len(body) >= sizes[0]:
            break
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


def get(path: str, host: str = "127.0.0.1") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()


def post(body: bytes) -> bytes:
    head = (
        "POST /search?k=3 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def _foreign_host(server: Server) -> str:
    status, body = exchange(server.address, get("/health", f"evil.example:{server.address[1]}"))
    assert status == 421 and list(body) == ["error"], (status, body)
    assert exchange(server.address, get("/health"))[0] == 200
    return f"421 {body['error']}"


def _chunked_body(server: Server) -> str:
    before = server.rss_mb()
    with socket.create_connection(server.address, timeout=30) as sock:
        sock.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        got: list[tuple[int, dict]] = []
        reader = threading.Thread(target=lambda: got.append(answer(sock)), daemon=True)
        reader.start()
        chunk = b" " * 65536
        with contextlib.suppress(OSError):
            for _ in range(1024):
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        reader.join(30)
    grown = server.rss_mb() - before
    assert got and got[0][0] == 413, got
    assert grown < 32, f"the server grew by {grown:.0f} MB"
    return f"413, the server grew by {grown:.0f} MB"


def _declared_body(server: Server) -> str:
    status, body = exchange(
        server.address, b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000000\r\n\r\n["
    )
    assert status == 413, (status, body)
    return f"413 {body['error']}"


def _slow_headers(server: Server) -> str:
    started = time.monotonic()
    with socket.create_connection(server.address, timeout=60) as sock, contextlib.suppress(OSError):
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        while time.monotonic() - started < 60:
            sock.sendall(b"X")
            time.sleep(0.5)
    seconds = time.monotonic() - started
    assert seconds < 20, f"still connected after {seconds:.0f} s"
    return f"cut off after {seconds:.1f} s"


def _idle_connections(server: Server) -> str:
    held = []
    with contextlib.suppress(OSError):
        for _ in range(300):
            held.append(socket.create_connection(server.address, timeout=5))
    time.sleep(1)
    closed = 0
    for sock in held:
        sock.setblocking(False)
        try:
            closed += sock.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    for sock in held:
        sock.close()
    time.sleep(0.5)
    assert closed >= len(held) - 64, f"only {closed} of {len(held)} closed"
    assert exchange(server.address, get("/health"))[0] == 200
    return f"{closed} of {len(held)} closed at once, then it answers"


def _surrogate(server: Server) -> str:
    status, body = exchange(server.address, post(b'["\\ud800 apple"]'))
    assert status == 400 and "not UTF-8" in body["error"], (status, body)
    return f"400 {body['error']}"


def _long_query(server: Server) -> str:
    started = time.monotonic()
    status, body = exchange(server.address, post(json.dumps(["a red apple " * 800_000]).encode()))
    seconds = time.monotonic() - started
    assert status == 200 and len(body[0]["query"]) == 1000, status
    assert seconds < 10, f"{seconds:.1f} s"
    return f"200 in {seconds:.1f} s, the query cut to 1000 characters"


def _log_flood(server: Server) -> str:
    for number in range(500):
        with contextlib.suppress(OSError), socket.create_connection(server.address, timeout=10) as sock:
            sock.sendall(b"\x16\x03\x01 not http %d\r\n\r\n" % number)
            sock.recv(1000)
    return "500 answered"


PROBES: dict[str, Callable[[Server], str]] = {
    "foreign-host": _foreign_host,
    "chunked-body": _chunked_body,
    "declared-body": _declared_body,
    "slow-headers": _slow_headers,
    "idle-connections": _idle_connections,
    "surrogate": _surrogate,
    "long-query": _long_query,
    "log-flood": _log_flood,
}


def probe(name: str, index: str) -> int:
    server = Server(index)
    try:
        said = PROBES[name](server)
        logged = server.stop()
        assert not logged, f"the server logged {len(logged)} line(s): {logged[0][:200]}"
    except Exception as exc:  # a failed check, or an answer that is not the server's JSON
        print(f"probe FAILED: {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if server.process.poll() is None:
            os.kill(server.process.pid, signal.SIGKILL)
    print(f"probe ok: {name}: {said}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(probe(sys.argv[1], sys.argv[2]))

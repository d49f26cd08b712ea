"""``mispair serve``: an index's text searches over HTTP, with JSON (``pip install 'mispair[serve]'``).

The index is loaded once; every request searches it as :meth:`~mispair.search.Index.search_texts`
does (one request at a time: the model and its caches are not shared between threads).

- ``GET /search?q=TEXT&k=10&rerank=0`` → ``{"query": TEXT, "results": "images", "hits": [...]}``
  (each hit as :meth:`~mispair.search.index.Hit.to_dict`, what ``mispair search --json`` prints);
- ``POST /search?k=10&rerank=0`` with a JSON list of texts → a list of such objects, in order;
- ``GET /health`` → ``{"status": "ok", ...}`` with the index's size.

Every bad request is a 4xx answer ``{"error": "..."}``, one line: a mistake (an empty text, ``k``
above ``rerank``, a text that is not UTF-8) the line the command line would print, a malformed
request (not JSON, not a list of texts, a wrong parameter) what is wrong with it; nothing is
logged for it, so no client makes the log grow. A query is cut to ``MAX_TEXT_CHARS`` characters
before it is tokenized, as every reader cuts a caption (:mod:`mispair.search.queries`; the
answer's ``query`` is the text searched).

It serves its user only: it listens on 127.0.0.1 unless told otherwise (``--host``; there is no
authentication), answers only requests naming an allowed ``Host`` (the loopback names, the
address it listens on and ``--allow-host``: a page of another site reaching it through DNS
rebinding is refused, :mod:`mispair.search.serve_guard`), bounds request bodies however sent
(:data:`MAX_BODY`), the time a request may take to arrive (:data:`REQUEST_SECONDS`) and the
connections open at once (:data:`MAX_CONNECTIONS`, :mod:`mispair.search.serve_protocol`).

Example:
    >>> with running(Index.load("oc.index")) as url:  # doctest: +SKIP
    ...     urllib.request.urlopen(f"{url}/search?q=apple&k=3").read()
"""

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from mispair.errors import ConfigError, MispairError
from mispair.limits import RANGES
from mispair.safe_parse import load_json
from mispair.search.queries import cut_queries
from mispair.search.serve_guard import LOOPBACK_NAMES, RequestGuard, allowed_hosts, is_loopback

if TYPE_CHECKING:
    from fastapi import FastAPI

    from mispair.search.index import Index

MAX_QUERIES = 10_000
"""Texts one POST may hold (more: a 413 answer; send them in several requests)."""
MAX_BODY = 10 << 20
"""Bytes a request body may hold, however it is sent (a declared length or chunks)."""
REQUEST_SECONDS = 10.0
"""Seconds a request may take to arrive whole, headers and body, from its first byte."""
KEEP_ALIVE_SECONDS = 5
"""Seconds an idle connection is kept between two requests."""
MAX_CONNECTIONS = 64
"""Connections open at once; one more is closed as it is accepted."""


def require_server() -> None:
    """A one-line error unless FastAPI and uvicorn can be imported."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"mispair serve needs FastAPI and uvicorn ({exc.name or 'fastapi'} is not installed): "
            "pip install 'mispair[serve]'"
        ) from None


def create_app(index: "Index", hosts: Iterable[str] = LOOPBACK_NAMES) -> "FastAPI":
    """The HTTP application answering searches of ``index`` (see the module docstring) to requests
    naming one of ``hosts`` (:func:`~mispair.search.serve_guard.allowed_hosts`)."""
    require_server()
    from fastapi import FastAPI, Query, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException

    from mispair.version import __version__

    app = FastAPI(title="mispair search", version=__version__, docs_url=None, redoc_url=None)
    app.add_middleware(RequestGuard, hosts=hosts, max_body=MAX_BODY)
    lock = threading.Lock()
    (k_low, k_high), (rerank_low, rerank_high) = RANGES["top_k"], RANGES["rerank"]
    K = Annotated[int, Query(ge=k_low, le=k_high)]
    Rerank = Annotated[int, Query(ge=rerank_low, le=rerank_high)]

    def search(texts: list[str], k: int, rerank: int) -> list[dict[str, Any]]:
        texts, _ = cut_queries(texts)  # before the lock: a long text costs the bound, no more
        with lock:
            found = index.search_texts(texts, k=k, rerank=rerank)
        return [
            {"query": text, "results": "images", "hits": [h.to_dict() for h in hits]}
            for text, hits in zip(texts, found)
        ]

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status, headers=_NO_SNIFF)

    @app.exception_handler(MispairError)
    def refused(request: Request, exc: MispairError) -> JSONResponse:
        return error(400, str(exc))

    @app.exception_handler(RequestValidationError)
    def malformed(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(422, _first_problem(exc.errors()))

    @app.exception_handler(HTTPException)
    def not_here(request: Request, exc: HTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail))

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "index": str(index.path) if index.path else None,
            "kind": index.spec.describe(),
            "images": index.n_images,
            "captions": index.n_captions,
        }

    @app.get("/search")
    def search_one(q: str, k: K = 10, rerank: Rerank = 0) -> dict[str, Any]:
        return search([q], k, rerank)[0]

    @app.post("/search", response_model=None)
    async def search_many(request: Request, k: K = 10, rerank: Rerank = 0) -> Any:
        queries = load_json(await request.body(), "the request body")  # bounded by RequestGuard
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            return error(422, 'the request body: a JSON list of query texts, e.g. ["a red apple"]')
        if len(queries) > MAX_QUERIES:
            return error(413, f"{len(queries)} queries: at most {MAX_QUERIES} a request")
        return await run_in_threadpool(search, queries, k, rerank)

    return app


_NO_SNIFF = {"x-content-type-options": "nosniff"}


def _first_problem(errors: Sequence[Any]) -> str:
    """One line of FastAPI's validation errors: where the first is and what it says."""
    if not errors:
        return "a malformed request"
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()) if part not in ("query", "body"))
    return f"{where or 'request'}: {first.get('msg', 'invalid')}" + (
        f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    )


def serve(
    index: "Index",
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    allow_hosts: Sequence[str] = (),
    log: Callable[[str], None] = print,
) -> None:
    """Answer searches of ``index`` on ``host:port`` (0: a free port) until interrupted (Ctrl+C);
    says where, and who can reach it, with ``log`` once it listens. ``allow_hosts``: more names
    the ``Host`` header may give (:func:`~mispair.search.serve_guard.allowed_hosts`). An address
    it cannot listen on is a one-line error."""
    server, sock, hosts = _server(index, host, port, allow_hosts)
    log(f"serving {index.describe()} at {_url(sock)} {_reach(host, hosts)}")
    log("  GET /search?q=TEXT&k=10, POST /search (a JSON list of texts), GET /health; Ctrl+C stops it")
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl+C: uvicorn shut down, then passes it on
        server.run(sockets=[sock])
    log("stopped")


def _reach(host: str, hosts: Sequence[str]) -> str:
    """Who can reach a server listening on ``host``, in words."""
    if is_loopback(host):
        return "(loopback only: this machine's programs, no one on the network)"
    return (
        f"(reachable from the network, without authentication; answers Host {', '.join(hosts)}; "
        "--host 127.0.0.1 keeps it to this machine)"
    )


@contextlib.contextmanager
def running(
    index: "Index",
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    allow_hosts: Sequence[str] = (),
    timeout: float = 30.0,
) -> Iterator[str]:
    """Answer searches of ``index`` in a background thread while the block runs; yields the base
    URL (``http://127.0.0.1:PORT``); the server stops when the block ends."""
    server, sock, _ = _server(index, host, port, allow_hosts)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise MispairError(f"the search server at {_url(sock)} did not start")
            time.sleep(0.01)
        yield _url(sock)
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()


def _server(
    index: "Index", host: str, port: int, allow_hosts: Sequence[str]
) -> tuple[Any, socket.socket, list[str]]:
    """A uvicorn server of :func:`create_app`, the socket it serves, listening from here on (a
    port in use is a one-line error, and port 0 has its number before the server starts) and
    the ``Host`` names it answers. uvicorn logs errors only: a bad request is no log line."""
    import uvicorn

    from mispair.search.serve_protocol import bounded_protocol

    hosts = allowed_hosts(host, allow_hosts)
    app = create_app(index, hosts)
    sock = _bind(host, port)
    config = uvicorn.Config(
        app,
        http=bounded_protocol(REQUEST_SECONDS, MAX_CONNECTIONS),
        log_level="error",
        access_log=False,
        lifespan="off",
        server_header=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=2,
    )
    return uvicorn.Server(config), sock, hosts


def _bind(host: str, port: int) -> socket.socket:
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigError(f"--host {host}: not an address to listen on ({exc.strerror or exc})") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)  # connections wait from now on, before the server's loop accepts them
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})"
        ) from None
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

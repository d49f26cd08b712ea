"""``mispair serve``: an index's text searches over HTTP, with JSON (``pip install 'mispair[serve]'``).

The index is loaded once; every request searches it as :meth:`~mispair.search.Index.search_texts`
does (one request at a time: the model and its caches are not shared between threads).

- ``GET /search?q=TEXT&k=10&rerank=0`` → ``{"query": TEXT, "results": "images", "hits": [...]}``
  (each hit as :meth:`~mispair.search.index.Hit.to_dict`, what ``mispair search --json`` prints);
- ``POST /search?k=10&rerank=0`` with a JSON list of texts → a list of such objects, in order;
- ``GET /health`` → ``{"status": "ok", ...}`` with the index's size.

A mistake in a request (an empty text, ``k`` above ``rerank``) is a 400 answer with
``{"error": "..."}``, the one line the command line would print; malformed parameters are
FastAPI's 422. There is no authentication: it listens on 127.0.0.1 unless told otherwise.

Example:
    >>> with running(Index.load("oc.index")) as url:  # doctest: +SKIP
    ...     urllib.request.urlopen(f"{url}/search?q=apple&k=3").read()
"""

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any

from mispair.errors import ConfigError, MispairError
from mispair.limits import RANGES

if TYPE_CHECKING:
    from fastapi import FastAPI

    from mispair.search.index import Index

MAX_QUERIES = 10_000
"""Texts one POST may hold (more: a 413 answer; send them in several requests)."""
MAX_BODY = 10 << 20
"""Bytes a request body may hold."""


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


def create_app(index: "Index") -> "FastAPI":
    """The HTTP application answering searches of ``index`` (see the module docstring)."""
    require_server()
    from fastapi import Body, FastAPI, Query, Request
    from fastapi.responses import JSONResponse

    from mispair.version import __version__

    app = FastAPI(title="mispair search", version=__version__)
    lock = threading.Lock()
    (k_low, k_high), (rerank_low, rerank_high) = RANGES["top_k"], RANGES["rerank"]
    K = Annotated[int, Query(ge=k_low, le=k_high)]
    Rerank = Annotated[int, Query(ge=rerank_low, le=rerank_high)]

    def search(texts: list[str], k: int, rerank: int) -> list[dict[str, Any]]:
        with lock:
            found = index.search_texts(texts, k=k, rerank=rerank)
        return [
            {"query": text, "results": "images", "hits": [h.to_dict() for h in hits]}
            for text, hits in zip(texts, found)
        ]

    @app.exception_handler(MispairError)
    def refused(request: Request, exc: MispairError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=400)

    @app.middleware("http")
    async def bounded(request: Request, call_next: Callable) -> Any:
        length = request.headers.get("content-length", "0")
        if not length.isdecimal() or int(length) > MAX_BODY:
            return JSONResponse({"error": f"a request body holds at most {MAX_BODY} bytes"}, status_code=413)
        return await call_next(request)

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
    def search_many(
        queries: Annotated[list[str], Body()], k: K = 10, rerank: Rerank = 0
    ) -> list[dict[str, Any]] | JSONResponse:
        if len(queries) > MAX_QUERIES:
            return JSONResponse(
                {"error": f"{len(queries)} queries: at most {MAX_QUERIES} a request"}, status_code=413
            )
        return search(queries, k, rerank)

    return app


def serve(
    index: "Index", host: str = "127.0.0.1", port: int = 8000, *, log: Callable[[str], None] = print
) -> None:
    """Answer searches of ``index`` on ``host:port`` (0: a free port) until interrupted (Ctrl+C);
    says where with ``log`` once it listens. An address it cannot listen on is a one-line error."""
    server, sock = _server(index, host, port)
    log(f"serving {index.describe()} at {_url(sock)} (GET /search?q=TEXT&k=10, POST /search, GET /health)")
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl+C: uvicorn shut down, then passes it on
        server.run(sockets=[sock])
    log("stopped")


@contextlib.contextmanager
def running(
    index: "Index", host: str = "127.0.0.1", port: int = 0, *, timeout: float = 30.0
) -> Iterator[str]:
    """Answer searches of ``index`` in a background thread while the block runs; yields the base
    URL (``http://127.0.0.1:PORT``); the server stops when the block ends."""
    server, sock = _server(index, host, port)
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


def _server(index: "Index", host: str, port: int) -> tuple[Any, socket.socket]:
    """A uvicorn server of :func:`create_app` and the socket it serves, listening from here on:
    a port in use is a one-line error, and port 0 has its number before the server starts."""
    import uvicorn

    app = create_app(index)
    sock = _bind(host, port)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    return uvicorn.Server(config), sock


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

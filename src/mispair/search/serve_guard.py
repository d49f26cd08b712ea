"""What ``mispair serve`` checks of a request before the application reads it: the ``Host`` it was
sent to and the size of its body, however it is sent.

:class:`RequestGuard` is a plain ASGI middleware in front of the application:

- a request whose ``Host`` header is not on the allow-list is a 421 answer: a page of another site
  that a browser sends to ``127.0.0.1`` through DNS rebinding names its own host there, so it
  never reads the index (what Starlette's ``TrustedHostMiddleware`` does, with the server's JSON
  error instead of its plain text);
- a body above ``max_body`` bytes is a 413 answer, whether it declares its length or comes in
  chunks: the bound is counted while the body is read, so at most ``max_body`` bytes are ever
  held; the rest of a refused body is read and dropped by the server's protocol
  (:mod:`mispair.search.serve_protocol`) until its deadline, never kept.

Every refusal is ``{"error": "..."}``, one line, the answer of every bad request of the server;
an error the application raises is a 500 answer of the same form, and one log line for the first
of its kind (no traceback, and no client can make the log grow).
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
"""The names a loopback server answers to (``localhost``, and its addresses)."""


def allowed_hosts(host: str, extra: Iterable[str] = ()) -> list[str]:
    """The ``Host`` names a server listening on ``host`` answers: the loopback names, ``host``
    itself unless it is a wildcard (``0.0.0.0``, ``::``), and ``extra`` (``--allow-host``)."""
    names = [*LOOPBACK_NAMES]
    if not is_wildcard(host):
        names.append(host)
    names += list(extra)
    return list(dict.fromkeys(name.strip("[]").lower() for name in names))


def is_wildcard(host: str) -> bool:
    return host in ("", "0.0.0.0", "::")


def is_loopback(host: str) -> bool:
    """``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name of a ``Host`` header without its port: ``127.0.0.1:8000`` → ``127.0.0.1``,
    ``[::1]:8000`` → ``::1``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class RequestGuard:
    """An ASGI middleware refusing a request to another host, or with a body above ``max_body``
    bytes, before ``app`` sees it (see the module docstring)."""

    def __init__(self, app: App, hosts: Iterable[str], max_body: int) -> None:
        self.app, self.hosts, self.max_body = app, frozenset(hosts), max_body
        self.failures: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
        host = host_name(headers.get("host", ""))
        if host not in self.hosts:
            shown = host.encode("ascii", "backslashreplace").decode()[:100] or "(none)"
            await refuse(
                send, 421, f"Host {shown!r}: this server answers only {', '.join(sorted(self.hosts))}"
            )
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdecimal() or int(length) > self.max_body):
            await refuse(send, 413, f"a request body holds at most {self.max_body} bytes")
            return
        body = await self._body(receive)
        if body is None:
            await refuse(send, 413, f"a request body holds at most {self.max_body} bytes")
            return
        await self._answer(scope, _replay(body, receive), send)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``app``'s answer; an error it raises is a 500 ``{"error": ...}`` (one log line for the
        first of each kind, never a traceback)."""
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            kind = type(exc).__name__
            if kind not in self.failures:
                self.failures.add(kind)
                logging.getLogger("uvicorn.error").error("a search failed: %s: %s", kind, str(exc)[:200])
            if not started:
                await refuse(send, 500, f"the search failed ({kind})")

    async def _body(self, receive: Receive) -> bytes | None:
        """The request's body, read up to the bound (None past it: the rest is left unread)."""
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return b"".join(parts)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return None
            parts.append(chunk)
            if not message.get("more_body", False):
                return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` giving ``body`` whole once, then what ``receive`` gives (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


async def refuse(send: Send, status: int, error: str) -> None:
    """Answer ``status`` with ``{"error": error}``."""
    body = json.dumps({"error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

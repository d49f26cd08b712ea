"""The HTTP/1.1 protocol of ``mispair serve``: uvicorn's h11 protocol with the bounds it lacks.

uvicorn closes an idle connection between two requests (``timeout_keep_alive``), but a client
that connects and sends a request's headers one byte a minute, or never finishes its body, keeps
its connection (and a file descriptor) for ever, and ``limit_concurrency`` answers the requests
past its bound (with a log line each) without closing their connections. Here:

- every request must arrive whole, headers and body, within ``request_seconds`` of its first byte
  (or of the connection, for the first): past it the connection is closed, without a log line;
- at most ``max_connections`` connections are open at once: one more is closed as it is accepted;
- a request h11 cannot parse (a header block above its 16 KiB bound, bad syntax) is a 400 answer
  ``{"error": "..."}``, like every bad request of the server, without a log line.

Use: ``uvicorn.Config(app, http=bounded_protocol(10.0, 64))``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


def bounded_protocol(request_seconds: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol class with these bounds (see the module docstring)."""

    class BoundedH11(_BoundedH11):
        pass

    BoundedH11.request_seconds, BoundedH11.max_connections = request_seconds, max_connections
    return BoundedH11


class _BoundedH11(H11Protocol):
    request_seconds: float = 10.0
    max_connections: int = 64
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.abort()  # refused as it is accepted: nothing read, nothing logged
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and self._deadline is None:
            self._arm()  # the next request on a kept-alive connection starts its clock
        super().data_received(data)
        if self.conn.their_state is h11.DONE:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        event = h11.Response(
            status_code=400,
            headers=[(b"content-type", b"application/json"), (b"connection", b"close")],
            reason=b"Bad Request",
        )
        body = json.dumps(
            {"error": "not a request this server reads (malformed HTTP or headers above 16 KiB)"}
        )
        for part in (event, h11.Data(data=body.encode()), h11.EndOfMessage()):
            self.transport.write(self.conn.send(part))
        self.transport.close()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.conn.their_state is not h11.DONE and not self.transport.is_closing():
            self.transport.abort()

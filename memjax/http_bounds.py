"""uvicorn with bounds on each request's time and size, and JSON errors all the way down.

    server = BoundedServer(app, HttpLimits(deadline=30.0), "127.0.0.1", 0)   # bound, not serving
    threading.Thread(target=server.serve_forever).start()
    ...
    body, error = await read_body(request, limits)   # in a FastAPI route taking `Request`

uvicorn's own timeouts are per read and between requests, so a client that trickles one byte
every few seconds holds a connection (and, behind a thread-per-request server, a thread) for as
long as it likes. Here every request has one deadline, counted from its first byte:

- headers still incomplete at the deadline: the protocol answers 408 JSON and closes;
- a body not complete by the deadline: `read_body` answers 408 JSON naming what arrived;
- the application's work: the route waits for it until the deadline (see `until_deadline`).

The HTTP parser's own refusals (a broken request line, conflicting Content-Length headers,
...) are answered 400 JSON rather than uvicorn's plain text. `read_body` also refuses a POST
without a length (411), a length over the limit (413, before reading it) and a length that is
not a number (400).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from uvicorn.protocols.http.h11_impl import H11Protocol

from memjax.bounded_input import ascii_int

# Where the protocol leaves the request's deadline (loop time) in the ASGI scope.
DEADLINE_KEY = "memjax.deadline"


@dataclass(frozen=True)
class HttpLimits:
    deadline: float = 30.0  # seconds from a request's first byte to its answer
    max_body_bytes: int = 1 << 20

    def __post_init__(self):
        if not self.deadline > 0:
            raise ValueError(f"deadline must be positive, got {self.deadline}")
        if self.max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be at least 1, got {self.max_body_bytes}")


def json_error(status: int, message: str, close: bool = False) -> JSONResponse:
    headers = {"Connection": "close"} if close else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _raw_json_response(status: int, phrase: str, message: str) -> bytes:
    body = json.dumps({"error": message}).encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def _bounded_protocol(deadline: float) -> type[H11Protocol]:
    class BoundedH11Protocol(H11Protocol):
        """uvicorn's h11 protocol with a per-request deadline and JSON parser errors."""

        _timer: asyncio.TimerHandle | None = None

        def data_received(self, data: bytes) -> None:
            if self._timer is None:  # the first byte of a request starts its clock
                self._expires = self.loop.time() + deadline
                self._timer = self.loop.call_at(self._expires, self._header_deadline)
            super().data_received(data)
            if self.scope is not None and DEADLINE_KEY not in self.scope:
                self.scope[DEADLINE_KEY] = self._expires

        def on_response_complete(self) -> None:
            self._stop_clock()
            super().on_response_complete()

        def connection_lost(self, exc) -> None:
            self._stop_clock()
            super().connection_lost(exc)

        def _stop_clock(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _header_deadline(self) -> None:
            in_app = self.cycle is not None and not self.cycle.response_complete
            if in_app or self.transport.is_closing():
                # The route answers by the same deadline (read_body, until_deadline); the
                # spent handle stays, so later bytes of this request start no new clock.
                return
            self._timer = None
            self.transport.write(
                _raw_json_response(
                    408,
                    "Request Timeout",
                    f"the request's headers did not arrive within {deadline:g} s",
                )
            )
            self.transport.close()

        def send_400_response(self, msg: str) -> None:
            self._stop_clock()
            self.transport.write(
                _raw_json_response(
                    400,
                    "Bad Request",
                    "not a valid HTTP/1.1 request (request line, headers, conflicting or "
                    "malformed Content-Length)",
                )
            )
            self.transport.close()

    return BoundedH11Protocol


class BoundedServer:
    """A uvicorn server bound on construction (port 0 picks a free one), with the
    `serve_forever` / `shutdown` / `server_close` life cycle of `socketserver`."""

    def __init__(self, app, limits: HttpLimits, host: str = "127.0.0.1", port: int = 8000):
        self.limits = limits
        self.socket = socket.create_server((host, port), reuse_port=False)
        self.server_address = self.socket.getsockname()
        config = uvicorn.Config(
            app,
            http=_bounded_protocol(limits.deadline),
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_keep_alive=5,
            timeout_graceful_shutdown=1,
            h11_max_incomplete_event_size=64 * 1024,  # request line + headers
        )
        self._server = uvicorn.Server(config)
        self._stopped = threading.Event()

    def serve_forever(self) -> None:
        try:
            self._server.run(sockets=[self.socket])
        finally:
            self._stopped.set()

    def shutdown(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._stopped.wait(timeout)

    def server_close(self) -> None:
        self.socket.close()


def remaining(request: Request, limits: HttpLimits) -> float:
    """Seconds left of the request's deadline (never negative)."""
    loop = asyncio.get_running_loop()
    expires = request.scope.get(DEADLINE_KEY)
    if expires is None:  # not served by BoundedH11Protocol (a test client): start now
        expires = request.scope[DEADLINE_KEY] = loop.time() + limits.deadline
    return max(0.0, expires - loop.time())


async def read_body(request: Request, limits: HttpLimits) -> tuple[bytes | None, JSONResponse]:
    """(body, None), or (None, the JSON error to answer) for a body that is too long, has no
    or a malformed or conflicting length, or does not arrive by the deadline."""
    lengths = set(request.headers.getlist("content-length"))
    chunked = "chunked" in request.headers.get("transfer-encoding", "").lower()
    if len(lengths) > 1:
        return None, json_error(400, "conflicting Content-Length headers", close=True)
    if not lengths and not chunked:
        return None, json_error(411, "a Content-Length header is required", close=True)
    length = ascii_int(next(iter(lengths))) if lengths else None
    if lengths and length is None:
        return None, json_error(400, "Content-Length is not a number", close=True)
    if length is not None and length > limits.max_body_bytes:
        return None, json_error(413, f"body over {limits.max_body_bytes} bytes", close=True)
    body = bytearray()
    try:
        async with asyncio.timeout(remaining(request, limits)):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limits.max_body_bytes:
                    return None, json_error(
                        413, f"body over {limits.max_body_bytes} bytes", close=True
                    )
    except TimeoutError:
        expected = f" of {length}" if length is not None else ""
        return None, json_error(
            408,
            f"the body ended after {len(body)}{expected} bytes (Content-Length): the whole "
            f"request must arrive within {limits.deadline:g} s",
            close=True,
        )
    except ClientDisconnect:
        return None, json_error(400, "the client closed the connection mid-body", close=True)
    return bytes(body), None


async def until_deadline(request: Request, limits: HttpLimits, future):
    """The result of `future` (an executor's work), or TimeoutError at the deadline; the work
    itself is not interrupted (a thread cannot be), but nobody waits for it any longer."""
    return await asyncio.wait_for(asyncio.shield(future), remaining(request, limits))


__all__ = [
    "BoundedServer",
    "DEADLINE_KEY",
    "HttpLimits",
    "json_error",
    "read_body",
    "remaining",
    "until_deadline",
]


class BodyLimit:
    """ASGI middleware: a request body over `max_bytes` gets 413, by its Content-Length or,
    without one, as soon as the bytes read pass the limit (nothing larger is ever held).
    `refusal(max_bytes)` is the JSON body of the 413, in the server's own error shape."""

    def __init__(self, app, max_bytes: int, refusal: Callable[[int], dict]):
        self.app, self.max_bytes, self.refusal = app, int(max_bytes), refusal

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return await self._refuse(scope, receive, send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise _TooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope, receive, send):
        await JSONResponse(self.refusal(self.max_bytes), 413)(scope, receive, send)


class _TooLarge(Exception):
    """The body passed the limit while it was read."""

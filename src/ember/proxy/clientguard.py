"""What one client connection may hold, enforced where its bytes arrive (uvicorn's protocol).

uvicorn (0.55, httptools) has no header or body read timeout: its keep-alive timer runs only
between two requests, so a connection that sends nothing, or one header byte at a time, or a
body that stops midway, was held as long as the client liked; 3,000 such connections were
3,000 sockets and tasks. Its ``limit_concurrency`` does not help: it is one global count,
checked once the headers are in, so the held connections count toward it and it is every
*other* client that gets the 503s.

Invariants (settings in ``config.py``, "client connections"):
- Headers: a request's headers are complete within ``client_header_timeout`` — of the
  connection for its first request, of its first byte for a later one on a kept-alive
  connection (between requests uvicorn's keep-alive timeout applies). Else the connection is
  closed, with a bare 408 when part of a request came (which protocol it spoke is not known
  yet).
- Header size: a request line and headers larger than ``max_header_kb`` (a WebSocket upgrade
  too) get a 431 whose JSON body both SDKs read as an error message, and the connection is
  closed: its bytes are counted as they arrive, so the proxy holds at most the limit plus one
  read (uvicorn has no limit: httptools gathered a 64 MiB header whole, 57 s and 5 s of the
  proxy's CPU). What the client still sends is read and dropped for ``LINGER`` seconds, so it
  reads the 431 instead of a connection reset. Bytes of a request whose headers end in a read
  are not counted (pipelined requests are never refused for the body before them).
- Body: the proxy reads bodies itself and answers a stalled one with a 408 in the protocol's
  own shape (``ember.proxy.limits``). This layer is the backstop, ``BACKSTOP_GRACE`` seconds
  later, for a body nobody reads any more (the rest of a body after its 413 or 408, a body
  sent to a path that answers without reading it): the connection is closed.
- Connections: at most ``client_max_connections`` open connections (HTTP and WebSocket) from
  one client address; a new one past that is closed at once, before it costs a task or a
  buffer. Refusals are logged once per ``WARN_EVERY`` seconds, with how many there were.

Nothing here reads or changes the bytes of a request that keeps within the limits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ember.config import Settings

log = logging.getLogger(__name__)

#: How long after the proxy's own body timeout this layer closes a connection whose body is
#: still unfinished: the proxy's 408 goes first whenever the proxy is reading.
BACKSTOP_GRACE = 2.0
#: At most one warning this often about refused or timed-out connections (a flood of 3,000
#: must not become 3,000 log lines).
WARN_EVERY = 10.0
#: How long a connection refused for its headers' size is still read (and what it sends
#: dropped) before it is closed: closing with unread bytes resets it, and the client may lose
#: the 431 it was sent.
LINGER = 2.0
_REQUEST_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
KIB = 1024


@dataclass(frozen=True)
class ClientLimits:
    """The per-connection limits (seconds, and connections per client address)."""

    header_timeout: float
    body_idle_timeout: float
    body_timeout: float
    max_connections: int
    max_header_bytes: int = 64 * KIB

    @classmethod
    def from_settings(cls, settings: Settings) -> ClientLimits:
        return cls(
            header_timeout=settings.client_header_timeout,
            body_idle_timeout=settings.client_body_idle_timeout,
            body_timeout=settings.client_body_timeout,
            max_connections=settings.client_max_connections,
            max_header_bytes=settings.max_header_kb * KIB,
        )


@dataclass
class _Tally:
    """What was refused or timed out since the last warning, per server."""

    counts: dict[str, int] = field(default_factory=dict)
    warned: float = float("-inf")

    def note(self, what: str, limits: ClientLimits) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1
        now = time.monotonic()
        if now - self.warned < WARN_EVERY:
            return
        self.warned = now
        said = ", ".join(f"{n} {w}" for w, n in sorted(self.counts.items()))
        self.counts = {}
        log.warning(
            "closed client connections: %s (limits: headers %gs and %d KiB, body idle %gs / "
            "%gs, %d connections per address)",
            said,
            limits.header_timeout,
            limits.max_header_bytes // KIB,
            limits.body_idle_timeout,
            limits.body_timeout,
            limits.max_connections,
        )


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits above. One timer per connection: the
    header deadline while a request's headers are due, then the body backstop while its body
    is (see the module docstring)."""

    limits: ClassVar[ClientLimits]
    tally: ClassVar[_Tally]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer: asyncio.TimerHandle | None = None
        self._began = False  # a byte of the current request has arrived
        self._heading = True  # the next bytes are a request's line and headers
        self._header_bytes = 0  # of the current request's, in the reads before this one
        self._reading = 0  # bytes of the read being parsed
        self._heads = 0  # requests whose headers were complete
        self._dropping = False  # refused: what still comes is read and dropped
        self._body_since = 0.0
        self._body_last = 0.0

    # -- connections per address ------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self._over_limit():
            self.tally.note("over the per-address limit", self.limits)
            transport.close()
            return
        self._began = False
        self._arm(self.limits.header_timeout, self._headers_late)

    def _over_limit(self) -> bool:
        if self.client is None:
            return False
        host = self.client[0]
        same = sum(1 for c in self.connections if _host(c) == host)
        return same > self.limits.max_connections

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    # -- headers ----------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._began = True
        if self._timer is None:  # a later request on a kept-alive connection
            self._arm(self.limits.header_timeout, self._headers_late)

    def data_received(self, data: bytes) -> None:
        if self._dropping:
            return
        counting, heads = self._heading, self._heads
        self._reading = len(data)
        super().data_received(data)
        if counting and self._heading and heads == self._heads and not self._dropping:
            self._header_bytes += len(data)  # all of it headers, and they go on
            if self._header_bytes > self.limits.max_header_bytes:
                self._headers_too_large()

    def on_headers_complete(self) -> None:
        self._cancel()
        self._began = False
        self._heading = False
        self._heads += 1
        limit = self.limits.max_header_bytes
        if self._header_bytes + self._reading > limit and self._head_size() > limit:
            self._headers_too_large()  # the app never sees the request
            return
        super().on_headers_complete()
        if self.parser.should_upgrade() and self._should_upgrade():
            return  # a WebSocket: its own protocol takes the connection over
        now = self.loop.time()
        self._body_since = self._body_last = now
        self._arm(self._body_wait(now), self._body_check)

    def _head_size(self) -> int:
        """The request line and headers' size, as sent (give or take their spacing)."""
        size = len(self.url) + 16  # the method, the version and the line ends
        for name, value in self.headers:
            size += len(name) + len(value) + 4
        return size

    def _headers_too_large(self) -> None:
        """Answer 431 (not inside another request's answer), then read and drop what comes
        for ``LINGER`` seconds and close."""
        if self.transport.is_closing():
            return
        kib = self.limits.max_header_bytes // KIB
        self.tally.note(f"with headers over {kib} KiB", self.limits)
        answering = self.cycle is not None and not self.cycle.response_complete
        if not answering:
            self.transport.write(headers_too_large(kib))
        self._dropping = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._arm(LINGER, self.transport.close)

    def _headers_late(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        self.tally.note(f"without headers in {self.limits.header_timeout:g}s", self.limits)
        answering = self.cycle is not None and not self.cycle.response_complete
        if self._began and not answering:  # never inside another request's answer
            self.transport.write(_REQUEST_TIMEOUT)
        self.transport.close()

    # -- body (the backstop) ----------------------------------------------------------------

    def on_body(self, body: bytes) -> None:
        if self._dropping:  # the rest of a refused request's read
            return
        self._body_last = self.loop.time()
        super().on_body(body)

    def on_message_complete(self) -> None:
        if self._dropping:
            return
        self._cancel()
        self._heading, self._header_bytes = True, 0
        super().on_message_complete()

    def _body_wait(self, now: float) -> float:
        """Seconds until the body is late, by pause or in all (negative: it is late)."""
        idle = self._body_last + self.limits.body_idle_timeout + BACKSTOP_GRACE
        total = self._body_since + self.limits.body_timeout + BACKSTOP_GRACE
        return min(idle, total) - now

    def _body_check(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        now = self.loop.time()
        if self.flow.read_paused:  # ember is not reading (backpressure): no fault of the client
            self._body_last = now
        wait = self._body_wait(now)
        if wait > 0:  # chunks came meanwhile: look again when it could be late
            self._arm(wait, self._body_check)
            return
        self.tally.note("with an unfinished body", self.limits)
        self.transport.close()

    # -- WebSocket --------------------------------------------------------------------------

    def handle_websocket_upgrade(self) -> None:
        if self._dropping:  # refused for its headers' size: never taken over
            return
        self._cancel()
        super().handle_websocket_upgrade()

    # -- the timer --------------------------------------------------------------------------

    def _arm(self, delay: float, callback: Callable[[], None]) -> None:
        self._cancel()
        self._timer = self.loop.call_later(max(delay, 0.0), callback)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def headers_too_large(kib: int) -> bytes:
    """The 431 answer: a JSON error both SDKs show (Anthropic's ``type``/``error`` and
    OpenAI's ``error.message``), naming the limit and the setting that raises it."""
    message = (
        f"request headers are larger than the proxy's {kib} KiB limit; send fewer or smaller "
        "headers, or raise it with EMBER_MAX_HEADER_KB (max_header_kb in config.toml)"
    )
    body = json.dumps(
        {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    ).encode()
    head = (
        "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def _host(connection: object) -> str | None:
    client = getattr(connection, "client", None)
    return client[0] if isinstance(client, tuple) and client else None


def guarded_protocol(limits: ClientLimits) -> type[GuardedHttpProtocol]:
    """The protocol class for one server (uvicorn's ``http=``): its limits, and its own
    tally of refusals."""
    given = limits

    class Guarded(GuardedHttpProtocol):
        limits = given
        tally = _Tally()

    return Guarded

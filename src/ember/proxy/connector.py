"""Opening connections to the provider: a finite pool, paced opens, and deadlines the kernel keeps.

Why, measured with 200 concurrent streams through the proxy to the emulator served with a listen
backlog of 5 (``bench/upstream_backlog.py``, docs/benchmarks.md). With every connection opened
at once, the burst overflows the provider's accept queue and its kernel drops packets silently:

* SYNs are dropped: the client retries them on TCP's SYN backoff, the first after 1 s, for up
  to 2 minutes. ``sock_connect`` bounds that wait.
* Worse, connections answered with a SYN cookie (the SYN queue overflowed too) lose the
  handshake's last ACK. The client believes it is connected, aiohttp's connect has returned, the
  request is written and then waits on the *read* timeout (600 s) while TCP retransmits it with
  exponential backoff. Connections opened in the same burst retransmit in lock-step and only
  backlog + 1 of them fit into the queue per round, so they are answered six at a time at
  4, 7, 14, 27, 55, 108 s; after about 2 minutes the provider's kernel resets the rest (a 502).

The rules, each against one of those failures:

1. ``max_opening``: at most this many connections being opened (TCP + TLS) to one host at once;
   the rest wait their turn inside the connect timeout. A burst of agents then reaches the
   provider at a pace its accept loop mostly keeps up with (the bench: 437 accept-queue
   overflows become 20, and every stream is answered). Over TLS (every real provider)
   a handshake completes only once the provider's server has accepted the connection, so this
   also bounds how much of its accept queue the proxy can occupy.
2. ``sock_connect`` = the connect timeout, and the connect timeout also covers waiting for a pool
   slot or an opening turn: a provider that black-holes SYNs, or a pool full of live streams,
   is a 504 within ``upstream_connect_timeout``, never a hang.
3. ``TCP_USER_TIMEOUT`` = the connect timeout on every upstream socket (Linux): request bytes the
   provider's kernel never acknowledges (the dropped-ACK case above, or a keep-alive connection
   the provider silently dropped) fail one connect timeout after they were sent (a 504), instead
   of waiting on the read timeout. It only counts time that *sent* data waits for an
   acknowledgement, which a healthy peer sends within a round trip; while a stream is read the
   proxy sends no data, so a slow model is never cut by it. (A provider that stops reading a
   request body for that long is cut too: its receive window stays shut.)
4. A finite pool (``max_connections``, ``max_per_host``), large enough for hundreds of concurrent
   agent streams (each holds one connection for its whole length): a runaway client cannot make
   the proxy open connections until it runs out of file descriptors and fails for everyone.
   Idle keep-alive connections are reused, so steady traffic opens no new connections at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

#: Seconds an idle connection stays in the pool for reuse.
KEEPALIVE_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """How many upstream connections may exist and be opened at once (0 = no limit)."""

    max_connections: int = 1024
    max_per_host: int = 512
    max_opening: int = 8


class PacedConnector(aiohttp.TCPConnector):
    """A ``TCPConnector`` that opens at most ``max_opening`` connections per host at once and
    gives every socket it opens a ``TCP_USER_TIMEOUT`` (rules 1 and 3 of the module docstring).

    Waiting for a turn happens inside aiohttp's connect timeout, so it is bounded like any other
    part of connecting. Overrides ``_create_connection``, aiohttp's one hook around opening a
    connection (TCP, TLS, proxy); a test fails if a new aiohttp stops calling it.
    """

    def __init__(self, limits: ConnectionLimits, user_timeout: float, **kwargs: Any) -> None:
        super().__init__(
            limit=limits.max_connections,
            limit_per_host=limits.max_per_host,
            keepalive_timeout=KEEPALIVE_SECONDS,
            **kwargs,
        )
        self._max_opening = limits.max_opening
        self._user_timeout_ms = max(1, round(user_timeout * 1000))
        self._turns: dict[tuple[str, int | None], asyncio.Semaphore] = {}
        #: Connections opened so far; with keep-alive reuse it stays far below the requests sent.
        self.opened = 0

    async def _create_connection(
        self, req: aiohttp.ClientRequest, traces: list[Any], timeout: aiohttp.ClientTimeout
    ) -> ResponseHandler:
        if self._max_opening:
            turn = self._turns.setdefault(
                (req.host, req.port), asyncio.Semaphore(self._max_opening)
            )
            async with turn:
                proto = await super()._create_connection(req, traces, timeout)
        else:
            proto = await super()._create_connection(req, traces, timeout)
        self.opened += 1
        self._set_user_timeout(proto)
        return proto

    def _set_user_timeout(self, proto: ResponseHandler) -> None:
        option = getattr(socket, "TCP_USER_TIMEOUT", None)
        transport = proto.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if option is None or sock is None:
            return
        with contextlib.suppress(OSError):  # not TCP (a test transport), or already closed
            sock.setsockopt(socket.IPPROTO_TCP, option, self._user_timeout_ms)

"""Talking to the provider: one pooled aiohttp session, header hygiene, error mapping.

aiohttp rather than httpx: measured here as the upstream client of this proxy it gave about 4x
the throughput under 32 concurrent streams. Connection errors and timeouts are mapped onto
``UpstreamError``/``UpstreamTimeout`` so the handler can answer 502/504 in the protocol's own
error shape instead of crashing. How connections are opened and bounded (and the failures
each rule prevents) is in ``ember.proxy.connector``.
"""

from __future__ import annotations

import contextlib
import errno
import io
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING

import aiohttp

from ember.errors import UpstreamError, UpstreamTimeout, WebSocketRefused
from ember.exchange import UpstreamReply
from ember.proxy.connector import ConnectionLimits, PacedConnector

if TYPE_CHECKING:
    from ember.config import Settings

#: Never forwarded in either direction (RFC 9110 hop-by-hop, and values aiohttp/uvicorn set).
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
        "proxy-connection",
    }
)
#: Dropped from responses: aiohttp already decoded the body, uvicorn sets its own framing.
_RESPONSE_DROP = _HOP_BY_HOP | {"content-encoding", "date", "server"}


def forward_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Client headers to send upstream: auth, version and beta headers pass unchanged;
    ``x-ember-*`` are ember's own and never leave the machine."""
    return [(k, v) for k, v in headers if k not in _HOP_BY_HOP and not k.startswith("x-ember-")]


def response_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [
        (k.lower().encode("latin-1"), v.encode("latin-1"))
        for k, v in headers
        if k.lower() not in _RESPONSE_DROP
    ]


class Upstream:
    def __init__(
        self,
        connect_timeout: float,
        read_timeout: float,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.limits = limits or ConnectionLimits()
        # ``connect`` bounds the whole wait for a connection (pool slot, opening turn, TCP, TLS);
        # ``sock_connect`` the handshake itself, so a black-holed SYN is not retried for 2 min.
        self._timeout = aiohttp.ClientTimeout(
            total=None,
            connect=connect_timeout,
            sock_connect=connect_timeout,
            sock_read=read_timeout,
        )
        self._session: aiohttp.ClientSession | None = None
        self.connector: PacedConnector | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Upstream:
        limits = ConnectionLimits(
            max_connections=settings.upstream_max_connections,
            max_per_host=settings.upstream_max_connections_per_host,
            max_opening=settings.upstream_max_opening,
        )
        return cls(settings.upstream_connect_timeout, settings.upstream_read_timeout, limits)

    async def start(self) -> None:
        if self._session is None:
            self.connector = PacedConnector(
                self.limits, user_timeout=self.connect_timeout, ttl_dns_cache=300
            )
            self._session = aiohttp.ClientSession(
                connector=self.connector,
                timeout=self._timeout,
                auto_decompress=True,
                skip_auto_headers=("User-Agent", "Content-Type"),
            )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @contextlib.asynccontextmanager
    async def call(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes
    ) -> AsyncIterator[UpstreamReply]:
        """One call as plain values (``ember.exchange.UpstreamClient``), for features that call
        the provider on their own; the connection is released when the block ends."""
        resp = await self.send(method, url, headers, body)
        async with resp:
            yield UpstreamReply(resp.status, list(resp.headers.items()), _chunks(resp, url))

    async def send(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes
    ) -> aiohttp.ClientResponse:
        """Send the request and return once the status line and headers arrived."""
        session = await self._started()
        with self._mapped_errors(url):
            return await session.request(
                method, url, headers=headers, data=_payload(body), allow_redirects=False
            )

    async def ws_connect(
        self, url: str, headers: list[tuple[str, str]], max_message: int
    ) -> aiohttp.ClientWebSocketResponse:
        """Open a WebSocket to the provider (through the same bounded pool and timeouts as
        ``send``). A handshake answered without an upgrade raises ``WebSocketRefused`` with the
        provider's status; an unreachable or silent provider ``UpstreamError``/``UpstreamTimeout``.
        ``max_message`` bounds one message in bytes (0: no bound)."""
        session = await self._started()
        with self._mapped_errors(url):
            try:
                return await session.ws_connect(
                    url,
                    headers=headers,
                    autoping=True,
                    max_msg_size=max_message,
                    timeout=aiohttp.ClientWSTimeout(ws_close=self.connect_timeout),
                )
            except aiohttp.WSServerHandshakeError as exc:
                raise WebSocketRefused(exc.status, url) from exc

    async def _started(self) -> aiohttp.ClientSession:
        if self._session is None:
            await self.start()
        assert self._session is not None
        return self._session

    @contextlib.contextmanager
    def _mapped_errors(self, url: str) -> Iterator[None]:
        """aiohttp's connection errors and timeouts as ``UpstreamError``/``UpstreamTimeout``."""
        try:
            yield
        except aiohttp.ConnectionTimeoutError as exc:
            raise UpstreamTimeout(
                f"could not open a connection to the provider within the {self._connect_s}"
                f" connect timeout ({url}): it is overloaded or unreachable, or all"
                f" {self.limits.max_per_host} connections to it are busy"
                " (upstream_connect_timeout, upstream_max_connections_per_host)"
            ) from exc
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise UpstreamTimeout(f"provider did not answer within the timeout ({url})") from exc
        except aiohttp.ClientOSError as exc:
            if exc.errno == errno.ETIMEDOUT:  # TCP_USER_TIMEOUT: the request was never acked
                raise UpstreamTimeout(
                    f"the provider did not acknowledge the request within the {self._connect_s}"
                    f" connect timeout ({url}): it is overloaded or unreachable"
                    " (upstream_connect_timeout)"
                ) from exc
            raise UpstreamError(f"cannot reach provider at {url}: {exc}") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"cannot reach provider at {url}: {exc}") from exc

    @property
    def _connect_s(self) -> str:
        return f"{self.connect_timeout:g}s"


async def _chunks(resp: aiohttp.ClientResponse, url: str) -> AsyncIterator[bytes]:
    try:
        async for chunk in resp.content.iter_any():
            yield chunk
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise UpstreamError(f"provider cut the answer from {url}: {exc!r}") from exc


#: aiohttp writes a ``bytes`` body in one piece and, past 1 MiB, warns that this may hold up
#: the event loop (a ``ResourceWarning``: under pytest's warnings-as-errors every request over
#: 1 MiB became a 500). A ``BytesIO`` goes out in 64 KiB pieces, giving the loop back between
#: them; the bytes on the wire, ``content-length`` included, are the same.
_ONE_PIECE_MAX = 1 << 20


def _payload(body: bytes) -> bytes | io.BytesIO | None:
    if not body:
        return None
    return io.BytesIO(body) if len(body) > _ONE_PIECE_MAX else body

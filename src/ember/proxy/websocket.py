"""Responses over WebSocket on ``/v1/responses``: the handshake, on both sides.

The client's upgrade is answered only after the provider answered ember's: one upstream
WebSocket per client WebSocket, opened before the client's is accepted. So a provider that does
not serve WebSocket is a clean ``426`` to the client (Codex falls back to HTTP at once, see
``ws_support``) instead of an accepted socket that dies on the first request, and the headers of
the provider's handshake (``x-codex-turn-state``, ``openai-model``...) reach the client. What
flows on an accepted connection is ``ws_session``'s job.

An upgrade the proxy's doors refuse (``proxy.doors``: a foreign ``Host``, a web page's
``Origin``, another machine without the token) is denied before the provider is dialled (the
app checks them before any WebSocket route, ``proxy.routes``, and denies with ``deny``).

Every refusal is an HTTP answer in the OpenAI error shape (``error.message`` says why), never a
dropped connection: a client that cannot upgrade must learn it from the status.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from ember.config import Settings
from ember.errors import UpstreamError, UpstreamTimeout, WebSocketRefused
from ember.proxy.flow import ExchangeFlow
from ember.proxy.relay import Receive, Send
from ember.proxy.upstream import Upstream, forward_headers, response_headers
from ember.proxy.ws_session import ADAPTER, PATH, ResponsesSession
from ember.proxy.ws_support import (
    REFUSAL_STATUS,
    RefusalMemo,
    provider_lacks_websocket,
    refusal_reason,
)

log = logging.getLogger(__name__)

__all__ = [
    "MAX_MESSAGE_BYTES",
    "PATH",
    "ResponsesSocket",
    "accept_headers",
    "deny",
    "upstream_headers",
    "ws_url",
]

#: Largest message accepted from either side (bytes). A Codex request carries the whole history
#: (with images, as base64) in one message; the server's bound is set to the same in
#: ``ember.server``.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024

#: Handshake headers that belong to the one hop they were sent on.
_HANDSHAKE_ONLY = frozenset(
    {
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "sec-websocket-accept",
        "sec-websocket-protocol",
    }
)


def ws_url(openai_url: str, query: str) -> str:
    """The provider's WebSocket URL: ``EMBER_OPENAI_URL`` (ending in ``/v1``) + ``/responses``
    with ``ws``/``wss`` for ``http``/``https``."""
    base = openai_url + "/responses"
    if base.startswith("https://"):
        base = "wss://" + base[len("https://") :]
    elif base.startswith("http://"):
        base = "ws://" + base[len("http://") :]
    return f"{base}?{query}" if query else base


def upstream_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Client handshake headers to send to the provider: as ``forward_headers`` for HTTP (auth,
    ``openai-beta``, Codex's session headers pass), minus the WebSocket handshake's own."""
    return [(k, v) for k, v in forward_headers(headers) if k not in _HANDSHAKE_ONLY]


def accept_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """The provider's handshake answer headers to pass to the client on accept."""
    return [
        (k, v)
        for k, v in response_headers(headers)
        if k.decode("latin-1") not in _HANDSHAKE_ONLY and not k.startswith(b"content-")
    ]


async def deny(send: Send, scope: dict[str, Any], status: int, message: str) -> None:
    """Refuse the upgrade with an HTTP ``status`` and an OpenAI-shaped JSON body."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})  # the server answers 403
        return
    body = ADAPTER.error_body(status, f"ember: {message}")
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": body})


class ResponsesSocket:
    """The WebSocket endpoint of ``PATH`` (a ``WebSocketRoute``'s handler): the handshake
    with the provider, then the session. ``http_only`` is a stage's reason to keep clients on
    HTTP (``Pipeline.http_only``). Providers that refused WebSocket are remembered per
    endpoint (``memo``), so per app."""

    def __init__(
        self,
        settings: Settings,
        upstream: Upstream,
        flow: ExchangeFlow,
        http_only: Callable[[], str | None],
    ) -> None:
        self.settings = settings
        self.upstream = upstream
        self.flow = flow
        self.http_only = http_only
        self.memo = RefusalMemo()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """One client WebSocket whose ``websocket.connect`` was received, from its handshake
        to its close. A handshake ember refuses is answered with ``deny``."""
        settings = self.settings
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
        query = scope.get("query_string", b"").decode("latin-1")
        url = ws_url(settings.openai_url, query)
        remembered = self.memo.refused(url)
        reason = refusal_reason(settings.openai_websocket, self.http_only(), remembered)
        if reason is not None:
            await deny(send, scope, REFUSAL_STATUS, reason)
            return
        try:
            upstream = await self.upstream.ws_connect(
                url, upstream_headers(headers), MAX_MESSAGE_BYTES
            )
        except WebSocketRefused as exc:
            if not provider_lacks_websocket(exc.status):
                await deny(send, scope, exc.status, str(exc))
                return
            if settings.openai_websocket == "auto":
                self.memo.remember(url)
            log.info(
                "provider refused WebSocket (status %d); clients fall back to HTTP", exc.status
            )
            await deny(send, scope, REFUSAL_STATUS, f"{exc}; use HTTP")
            return
        except UpstreamError as exc:
            status = 504 if isinstance(exc, UpstreamTimeout) else 502
            log.warning("upstream WebSocket failed status=%d error=%s", status, exc)
            await deny(send, scope, status, str(exc))
            return
        answer = (
            upstream._response.headers.items()
        )  # the handshake's answer (aiohttp keeps no other)
        try:
            await send({"type": "websocket.accept", "headers": accept_headers(answer)})
        except OSError:  # the client left while the provider was answering
            await upstream.close()
            return
        session = ResponsesSession(
            self.flow, settings, receive, send, upstream, dict(headers), query
        )
        await session.run()

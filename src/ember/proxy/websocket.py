"""Responses over WebSocket on ``/v1/responses``: the handshake, on both sides.

The client's upgrade is answered only after the provider answered ember's: one upstream
WebSocket per client WebSocket, opened before the client's is accepted. So a provider that does
not serve WebSocket is a clean ``426`` to the client (Codex falls back to HTTP at once, see
``ws_support``) instead of an accepted socket that dies on the first request, and the headers of
the provider's handshake (``x-codex-turn-state``, ``openai-model``...) reach the client. What
flows on an accepted connection is ``ws_session``'s job.

An upgrade the proxy's doors refuse (``proxy.doors``: a foreign ``Host``, a web page's
``Origin``, another machine without the token) is denied before the provider is dialled.

Every refusal is an HTTP answer in the OpenAI error shape (``error.message`` says why), never a
dropped connection: a client that cannot upgrade must learn it from the status.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ember.errors import UpstreamError, UpstreamTimeout, WebSocketRefused
from ember.protocols.openai_chat import openai_error_body
from ember.proxy.relay import Receive, Send
from ember.proxy.upstream import forward_headers, response_headers
from ember.proxy.ws_session import ResponsesSession
from ember.proxy.ws_support import (
    REFUSAL_STATUS,
    RefusalMemo,
    provider_lacks_websocket,
    refusal_reason,
)

if TYPE_CHECKING:
    from ember.proxy.app import ProxyApp

log = logging.getLogger(__name__)

#: The one path served over WebSocket.
PATH = "/v1/responses"
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

_memos: weakref.WeakKeyDictionary[ProxyApp, RefusalMemo] = weakref.WeakKeyDictionary()


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
    body = openai_error_body(status, f"ember: {message}")
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": body})


async def serve(app: ProxyApp, scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """One client WebSocket, from its handshake to its close. Never raises: a bug here is
    logged, and a handshake not yet answered is answered 500 by the server."""
    try:
        await _serve(app, scope, receive, send)
    except OSError:  # the client went away before its handshake was answered
        return
    except Exception:
        log.exception("unexpected error serving a WebSocket on %s", scope.get("path"))


async def _serve(app: ProxyApp, scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if (await receive())["type"] != "websocket.connect":
        return
    refused = app.doors.check(scope)
    if refused is not None:  # before anything is asked of the provider
        await deny(send, scope, refused.status, refused.message)
        return
    if scope["path"] != PATH:
        await deny(send, scope, 404, f"no WebSocket endpoint at {scope['path']}; use {PATH}")
        return
    settings = app.settings
    headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
    query = scope.get("query_string", b"").decode("latin-1")
    url = ws_url(settings.openai_url, query)
    memo = _memos.setdefault(app, RefusalMemo())
    remembered = memo.refused(url)
    reason = refusal_reason(settings.openai_websocket, app.pipeline.http_only, remembered)
    if reason is not None:
        await deny(send, scope, REFUSAL_STATUS, reason)
        return
    try:
        upstream = await app.upstream.ws_connect(url, upstream_headers(headers), MAX_MESSAGE_BYTES)
    except WebSocketRefused as exc:
        if not provider_lacks_websocket(exc.status):
            await deny(send, scope, exc.status, str(exc))
            return
        if settings.openai_websocket == "auto":
            memo.remember(url)
        log.info("provider refused WebSocket (status %d); clients fall back to HTTP", exc.status)
        await deny(send, scope, REFUSAL_STATUS, f"{exc}; use HTTP")
        return
    except UpstreamError as exc:
        status = 504 if isinstance(exc, UpstreamTimeout) else 502
        log.warning("upstream WebSocket failed status=%d error=%s", status, exc)
        await deny(send, scope, status, str(exc))
        return
    answer = upstream._response.headers.items()  # the handshake's answer (aiohttp keeps no other)
    try:
        await send({"type": "websocket.accept", "headers": accept_headers(answer)})
    except OSError:  # the client left while the provider was answering
        await upstream.close()
        return
    await ResponsesSession(app.flow, settings, receive, send, upstream, dict(headers), query).run()

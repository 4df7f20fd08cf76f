"""Exchanges over HTTP: the model endpoints, and pass-through for every other path.

A ``POST`` to a model endpoint (``/v1/messages``, ``/v1/chat/completions``, ``/v1/responses``,
Gemini's ``:generateContent`` and ``:streamGenerateContent``) goes through the flow: read
within the limits, admitted, prepared by the request stages, relayed, finished. Anything
else, and a request with ``x-ember-bypass: 1``, is passed through untouched to the provider
its path and headers point at, read within the same limits.

``HttpTransport`` is the HTTP framing of ``proxy.transport``: the body read from the request's
messages with ``max_body_mb`` and the body timeouts (``proxy.limits``), and ember's own errors
as one JSON answer in the protocol's error shape, never an HTML page or a dropped connection.
"""

from __future__ import annotations

from typing import Any

from ember.config import Settings
from ember.exchange import Exchange
from ember.protocols import adapter_for_path, guess_adapter
from ember.protocols.base import ProtocolAdapter
from ember.proxy import limits
from ember.proxy.delivery import Delivered, Framing
from ember.proxy.flow import ExchangeFlow
from ember.proxy.owned import relay_owned
from ember.proxy.relay import Receive, Send, relay, send_json
from ember.proxy.transport import read_request
from ember.proxy.upstream import Upstream, forward_headers

#: The header that sends a request to a model endpoint past every stage, as pass-through.
BYPASS_HEADER = "x-ember-bypass"


def scope_headers(scope: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's headers, names lower-cased, as sent (repeated names kept)."""
    return [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]


class HttpTransport:
    """One HTTP request, read and answered in its protocol's shape (``adapter``; None: the
    one ``guess_adapter`` finds from the path and headers)."""

    framing: Framing = "http"

    def __init__(
        self,
        scope: dict[str, Any],
        receive: Receive,
        send: Send,
        settings: Settings,
        adapter: ProtocolAdapter | None = None,
    ) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.settings = settings
        self.headers = scope_headers(scope)
        self.hmap = dict(self.headers)
        self.path: str = scope["path"]
        self.method: str = scope["method"]
        self.query = scope.get("query_string", b"").decode("latin-1")
        self._adapter = adapter

    @property
    def adapter(self) -> ProtocolAdapter:
        if self._adapter is None:
            self._adapter = guess_adapter(self.path, self.hmap)
        return self._adapter

    @property
    def where(self) -> str:
        return f"{self.method} {self.path}"

    async def read(self) -> bytes:
        return await limits.read_body(
            self.receive,
            self.hmap,
            limits.body_limit(self.settings),
            limits.body_timing(self.settings),
        )

    async def error(
        self,
        status: int,
        message: str,
        *,
        close: bool = False,
        retry: bool = True,
        retry_after: float | None = None,
    ) -> bytes:
        body = self.adapter.error_body(status, message)
        extra = [] if retry else [(b"x-should-retry", b"false")]
        if retry_after is not None:
            extra.append((b"retry-after", str(max(1, round(retry_after))).encode()))
        await send_json(self.send, status, body, close=close, extra=extra)
        return body


class HttpExchanges:
    """The handlers of the model endpoints (``exchange``) and of pass-through
    (``pass_through``)."""

    def __init__(self, settings: Settings, upstream: Upstream, flow: ExchangeFlow) -> None:
        self.settings = settings
        self.upstream = upstream
        self.flow = flow

    async def exchange(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """One exchange: a path no adapter serves after all (a pattern's odd model name), or
        a bypassed request, is passed through."""
        adapter = adapter_for_path(scope["path"])
        t = HttpTransport(scope, receive, send, self.settings, adapter)
        body = await read_request(t, self.settings)
        if body is None:
            return
        if adapter is None or t.hmap.get(BYPASS_HEADER, "").strip() == "1":
            await self._forward(t, body)
            return
        ex = await self.flow.admit(t, adapter, t.path, t.query, t.hmap, body)
        if ex is None:
            return
        turn = await self.flow.prepare(ex, t)
        if turn is None:
            return
        with turn:
            turn.finish(await self._relay(ex, t.headers, receive, turn.announcing(send)))

    async def pass_through(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """Any other request, to the provider its path and headers point at, untouched."""
        t = HttpTransport(scope, receive, send, self.settings)
        body = await read_request(t, self.settings)
        if body is not None:
            await self._forward(t, body)

    async def _forward(self, t: HttpTransport, body: bytes) -> None:
        target = t.adapter
        await relay(
            self.upstream,
            t.receive,
            t.send,
            method=t.method,
            url=target.upstream_url(self.settings, t.path, t.query),
            headers=forward_headers(t.headers),
            body=body,
            error_body=target.error_body,
        )

    async def _relay(
        self, ex: Exchange, headers: list[tuple[str, str]], receive: Receive, send: Send
    ) -> Delivered:
        url = ex.adapter.upstream_url(self.settings, ex.path, ex.query)
        if ex.owned_tools is not None:
            return await relay_owned(
                self.upstream,
                receive,
                send,
                adapter=ex.adapter,
                url=url,
                headers=forward_headers(headers),
                doc=ex.doc,
                tools=ex.owned_tools,
            )
        return await relay(
            self.upstream,
            receive,
            send,
            method="POST",
            url=url,
            headers=forward_headers(headers),
            body=ex.doc.to_bytes(),
            error_body=ex.adapter.error_body,
        )

"""The proxy as an ASGI application.

Routes: ``POST /v1/messages`` (Anthropic), ``POST /v1/chat/completions`` and
``POST /v1/responses`` (OpenAI) go through the pipeline; ``GET /healthz`` answers once the app
is started; any other path is passed through untouched to the provider the headers point at.

The proxy itself never crashes on input: a body that is not JSON (or is nested past
``max_json_depth``) gets a 400 in the protocol's error shape, one past ``max_body_mb`` a 413, a
provider that cannot be reached a 502/504, and an unexpected exception in ember's own code a 500
in the same shape — never an HTML page or a dropped connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

from ember.config import Settings
from ember.errors import ProtocolError, RequestTooLarge
from ember.project import resolve_project
from ember.protocols import ADAPTERS, ANTHROPIC, OPENAI_CHAT
from ember.protocols.base import ProtocolAdapter, Usage
from ember.proxy import limits
from ember.proxy.accounting import AccountingStage
from ember.proxy.owned import relay_owned
from ember.proxy.pipeline import Exchange, Outcome, Pipeline, Stage
from ember.proxy.relay import Receive, Relayed, Send, relay, send_json
from ember.proxy.tee import assemble
from ember.proxy.upstream import Upstream, forward_headers
from ember.session import derive_session_id
from ember.store.accounting import AccountingWriter

log = logging.getLogger(__name__)

_HEALTH_OK = b'{"status":"ok"}'
_HEALTH_STARTING = b'{"status":"starting"}'
#: How many leading messages are searched for a working directory (Claude Code and Codex put
#: their environment block in the first user turn; scanning a long history every turn is waste).
_CWD_SCAN_MESSAGES = 3


def _headers(scope: dict[str, Any]) -> list[tuple[str, str]]:
    return [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]


class ProxyApp:
    def __init__(
        self,
        settings: Settings,
        stages: Sequence[Stage] = (),
        *,
        writer: AccountingWriter | None = None,
    ) -> None:
        self.settings = settings
        self.upstream = Upstream(settings.upstream_connect_timeout, settings.upstream_read_timeout)
        self.writer = writer or AccountingWriter()
        all_stages = list(stages)
        if settings.accounting:
            all_stages.append(AccountingStage(self.writer, settings.price_table(), settings.home))
        self.pipeline = Pipeline(all_stages)
        self.ready = False
        self._background: set[asyncio.Task[None]] = set()

    # -- ASGI entry -------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            try:
                await self._http(scope, receive, send)
            except ConnectionAbortedError:
                return
            except Exception:
                log.exception("unexpected error handling %s %s", scope["method"], scope["path"])
                adapter = ADAPTERS.get(scope["path"], ANTHROPIC)
                # If the answer had already started, the connection is simply closed.
                with contextlib.suppress(Exception):
                    await send_json(send, 500, adapter.error_body(500, "ember: internal error"))

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.startup()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def startup(self) -> None:
        await self.upstream.start()
        self.ready = True

    async def shutdown(self) -> None:
        self.ready = False
        if self._background:
            await asyncio.wait(self._background, timeout=10)
        await self.pipeline.close()
        await self.upstream.close()

    async def drain(self) -> None:
        """Wait for outstanding response stages (tests and shutdown)."""
        while self._background:
            await asyncio.wait(set(self._background))

    # -- routing ----------------------------------------------------------------------------

    async def _http(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        path, method = scope["path"], scope["method"]
        if path == "/healthz" and method in ("GET", "HEAD"):
            status, body = (200, _HEALTH_OK) if self.ready else (503, _HEALTH_STARTING)
            await send_json(send, status, body)
            return
        headers = _headers(scope)
        hmap = dict(headers)
        query = scope.get("query_string", b"").decode("latin-1")
        adapter = ADAPTERS.get(path) if method == "POST" else None
        try:
            body = await limits.read_body(receive, hmap, limits.body_limit(self.settings))
        except RequestTooLarge:
            log.warning("refused a request body over max_body_mb on %s %s", method, path)
            message = f"ember: {limits.too_large_message(self.settings)}"
            error = (adapter or self._guess_adapter(hmap)).error_body(413, message)
            await send_json(send, 413, error)
            return
        if adapter is None or hmap.get("x-ember-bypass", "").strip() == "1":
            target = adapter or self._guess_adapter(hmap)
            url = self._url(target, path, query)
            await relay(
                self.upstream,
                receive,
                send,
                method=method,
                url=url,
                headers=forward_headers(headers),
                body=body,
                error_body=target.error_body,
            )
            return
        try:
            ex = self._exchange(adapter, path, query, hmap, body)
        except ProtocolError as exc:
            await send_json(send, 400, adapter.error_body(400, f"ember: {exc}"))
            return
        await self._exchange_flow(ex, headers, receive, send)

    def _guess_adapter(self, hmap: dict[str, str]) -> ProtocolAdapter:
        """Unknown paths (``/v1/models``, ``/v1/messages/count_tokens``...) go to Anthropic
        when the client speaks Anthropic (its SDK always sends ``anthropic-version``)."""
        if "anthropic-version" in hmap or "x-api-key" in hmap:
            return ANTHROPIC
        return OPENAI_CHAT

    def _url(self, adapter: ProtocolAdapter, path: str, query: str) -> str:
        if adapter is ANTHROPIC:
            url = self.settings.anthropic_url + path
        else:
            # EMBER_OPENAI_URL already ends in /v1, as OPENAI_BASE_URL does.
            url = self.settings.openai_url + (path[3:] if path.startswith("/v1/") else path)
        return f"{url}?{query}" if query else url

    # -- one exchange -----------------------------------------------------------------------

    def _exchange(
        self, adapter: ProtocolAdapter, path: str, query: str, hmap: dict[str, str], body: bytes
    ) -> Exchange:
        doc = limits.parse_body(body, self.settings)
        if not isinstance(doc.value, dict):
            raise ProtocolError("request body must be a JSON object")
        value = doc.value
        texts = (
            adapter.user_text(value, i)
            for i in range(min(adapter.message_count(value), _CWD_SCAN_MESSAGES))
        )
        project = resolve_project(
            hmap, self.settings.project_root, adapter.system_text(value), texts
        )
        session = derive_session_id(
            hmap,
            value,
            project.identity if project else None,
            adapter.model(value),
            adapter.first_user_text(value),
        )
        return Exchange(adapter, path, query, hmap, doc, self.settings, session, project)

    async def _exchange_flow(
        self, ex: Exchange, headers: list[tuple[str, str]], receive: Receive, send: Send
    ) -> None:
        await self.pipeline.run_request(ex)
        url = self._url(ex.adapter, ex.path, ex.query)
        if ex.owned_tools is not None:
            relayed = await relay_owned(
                self.upstream,
                receive,
                send,
                adapter=ex.adapter,
                url=url,
                headers=forward_headers(headers),
                doc=ex.doc,
                tools=ex.owned_tools,
            )
        else:
            relayed = await relay(
                self.upstream,
                receive,
                send,
                method="POST",
                url=url,
                headers=forward_headers(headers),
                body=ex.doc.to_bytes(),
                error_body=ex.adapter.error_body,
            )
        latency = (time.perf_counter() - ex.started) * 1000
        task = asyncio.create_task(self._finish(ex, relayed, latency))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _finish(self, ex: Exchange, relayed: Relayed, latency_ms: float) -> None:
        outcome = Outcome(
            status=relayed.status,
            kind=relayed.kind,
            message=None,
            streamed=relayed.streamed,
            latency_ms=latency_ms,
            ttfb_ms=relayed.ttfb_ms,
            error=relayed.error,
            hidden_rounds=relayed.hidden_rounds,
        )
        try:
            outcome.message = assemble(ex.adapter, relayed.chunks, relayed.streamed)
        except Exception:
            log.exception("could not assemble the answer of session %s", ex.session_id)
        if relayed.hidden_usage is not None and outcome.message is not None:
            outcome.message.usage = (outcome.message.usage or Usage()) + relayed.hidden_usage
        await self.pipeline.run_response(ex, outcome)

"""The proxy as an ASGI application.

Every request and WebSocket upgrade first passes ``ember.hosts``'s policy (``proxy.doors``): a
``Host`` that is not this proxy's, a web page's ``Origin`` on a request that changes state, or
a peer on another machine without ``proxy_token`` is refused in the protocol's error shape
before anything is read, forwarded or recorded.

Routes: ``POST /v1/messages`` (Anthropic), ``POST /v1/chat/completions`` and
``POST /v1/responses`` (OpenAI), ``POST /v1beta/models/{model}:generateContent`` and
``:streamGenerateContent`` (Gemini) go through the pipeline, and so does each request on a
WebSocket to ``/v1/responses`` (``proxy/websocket.py``); ``GET /healthz`` answers once the app
is started, ``GET /metrics`` with the app's registry in Prometheus' text format (the kernel's
metrics and what each stage registered); any other path is passed through untouched to the
provider the headers point at.

The proxy itself never crashes on input: a body that is not JSON (or is nested past
``max_json_depth``) gets a 400 in the protocol's error shape, one past ``max_body_mb`` a 413, a
provider that cannot be reached a 502/504, and an unexpected exception in ember's own code a 500
in the same shape — never an HTML page or a dropped connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ember.config import Settings
from ember.errors import ProtocolError, RequestTooLarge
from ember.exchange import Exchange, Refusal, Services, Stage, Stopping, TaskSet
from ember.hosts import Refused
from ember.metrics import StorageCollector, new_registry
from ember.protocols import adapter_for_path, guess_adapter
from ember.protocols.base import ProtocolAdapter
from ember.proxy import limits
from ember.proxy.delivery import Delivered, answered_refusal
from ember.proxy.doors import Doors
from ember.proxy.flow import ExchangeFlow
from ember.proxy.owned import relay_owned
from ember.proxy.pipeline import Pipeline
from ember.proxy.relay import Receive, Send, relay, send_json
from ember.proxy.upstream import Upstream, forward_headers
from ember.proxy.websocket import serve as serve_websocket
from ember.sessions import SessionRegistry
from ember.store import startcheck
from ember.store.registry import Storage, storage_for
from ember.transcripts import Transcripts

log = logging.getLogger(__name__)

_HEALTH_OK = b'{"status":"ok"}'
_ROOT = b'{"service":"ember"}'
_HEALTH_STARTING = b'{"status":"starting"}'


def _headers(scope: dict[str, Any]) -> list[tuple[str, str]]:
    return [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]


class ProxyApp:
    def __init__(
        self,
        settings: Settings,
        stages: Sequence[Stage] = (),
        *,
        storage: Storage | None = None,
        sessions: SessionRegistry | None = None,
    ) -> None:
        """``stages`` is the whole list, accounting included (``ember.compose`` builds it)."""
        self.settings = settings
        self.upstream = Upstream.from_settings(settings)
        self.storage = storage or storage_for(settings)
        self.sessions = sessions if sessions is not None else SessionRegistry()
        self.pipeline = Pipeline(stages)
        self.flow = ExchangeFlow(settings, self.sessions, self.pipeline)
        self.tasks = TaskSet()
        #: this app's metrics (``GET /metrics``); stages add theirs when they start
        self.metrics = new_registry()
        self.metrics.register(StorageCollector(self.storage))
        self.ready = False
        #: whether the user asked to stop at once (``ember proxy``: a second Ctrl-C); the
        #: server that runs the app sets it
        self.interrupted: Callable[[], bool] = lambda: False
        #: whether the server is stopping (the dashboard's live feeds end); set by the server
        self.stopping: Callable[[], bool] = lambda: False
        self._dashboard: Any = None
        #: who may use the proxy (``ember.hosts``): checked before any route
        self.doors = Doors(settings)

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
                adapter = guess_adapter(scope["path"], dict(_headers(scope)))
                # If the answer had already started, the connection is simply closed.
                with contextlib.suppress(Exception):
                    await send_json(send, 500, adapter.error_body(500, "ember: internal error"))
        elif scope["type"] == "websocket":
            await serve_websocket(self, scope, receive, send)

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
        transcripts = Transcripts(self.storage, self.settings.home, self.sessions)
        services = Services(
            self.settings,
            self.storage,
            self.sessions,
            self.upstream,
            self._url,
            transcripts,
            self.metrics,
            self.tasks,
        )
        await self.pipeline.start(services)
        startcheck.start(self.storage)  # a damaged file is said from the start, not at a write
        self.ready = True

    async def shutdown(self) -> None:
        """Finish what was accepted: response stages of answered requests; then stages get
        ``shadow_stop_seconds`` to wind down (shadow memory reads what is unread while the
        cache is hot; a second Ctrl-C skips it); then features' background work is cancelled,
        every stage flushes and every queued database write is made (a clean stop loses no
        row)."""
        self.ready = False
        await self.flow.wait(timeout=30)
        stopping = Stopping(self.settings.shadow_stop_seconds, self.interrupted)
        await self.pipeline.wind_down(stopping)
        await self.tasks.cancel_all()
        await self.pipeline.close()
        await asyncio.to_thread(self.storage.close)
        await self.upstream.close()

    async def drain(self) -> None:
        """Wait for outstanding response stages, then let stages write what they hold back
        (tests, the demo, benchmarks)."""
        await self.flow.drain()
        await self.pipeline.settle()

    # -- routing ----------------------------------------------------------------------------

    async def _http(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        path, method = scope["path"], scope["method"]
        if path == "/ui" or path.startswith("/ui/"):
            await self._ui(scope, receive, send)  # the dashboard checks its own doors
            return
        refused = self.doors.check(scope)
        if refused is not None:
            await self._refuse_door(scope, refused, send)
            return
        if path == "/healthz" and method in ("GET", "HEAD"):
            status, body = (200, self._health()) if self.ready else (503, _HEALTH_STARTING)
            await send_json(send, status, body)
            return
        if path == "/metrics" and method in ("GET", "HEAD"):
            await self._metrics(send, head=method == "HEAD")
            return
        if path == "/" and method in ("GET", "HEAD"):
            # Claude Code checks it can reach its base URL with a bare ``HEAD /`` (no key, no
            # version header): ember answers it; forwarding it guessed a provider at random.
            await send_json(send, 200, _ROOT)
            return
        headers = _headers(scope)
        hmap = dict(headers)
        query = scope.get("query_string", b"").decode("latin-1")
        adapter = adapter_for_path(path) if method == "POST" else None
        try:
            body = await limits.read_body(
                receive, hmap, limits.body_limit(self.settings), limits.body_timing(self.settings)
            )
        except RequestTooLarge:
            log.warning("refused a request body over max_body_mb on %s %s", method, path)
            message = f"ember: {limits.too_large_message(self.settings)}"
            error = (adapter or guess_adapter(path, hmap)).error_body(413, message)
            await send_json(send, 413, error)
            return
        except limits.BodyTimedOut as exc:
            log.warning("gave up on a request body on %s %s: %s", method, path, exc)
            message = f"ember: {limits.timed_out_message(exc)}"
            error = (adapter or guess_adapter(path, hmap)).error_body(408, message)
            await send_json(send, 408, error, close=True)
            return
        if adapter is None or hmap.get("x-ember-bypass", "").strip() == "1":
            target = adapter or guess_adapter(path, hmap)
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
            ex = self.flow.open(adapter, path, query, hmap, body)
        except ProtocolError as exc:
            await send_json(send, 400, adapter.error_body(400, f"ember: {exc}"))
            return
        await self._relay_exchange(ex, headers, receive, send)

    async def _refuse_door(self, scope: dict[str, Any], refused: Refused, send: Send) -> None:
        """A request ``ember.hosts`` refused, answered in its protocol's error shape before
        its body is read: nothing forwarded, nothing recorded. The connection is closed
        (the unread body is never read on), and the SDKs are told not to retry."""
        hmap = dict(_headers(scope))
        adapter = guess_adapter(scope["path"], hmap)
        body = adapter.error_body(refused.status, f"ember: {refused.message}")
        extra = [(b"x-should-retry", b"false")]
        await send_json(send, refused.status, body, close=True, extra=extra)

    async def _ui(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """The dashboard (``ember.ui``), built on its first visit: the proxy's start-up and
        memory do not pay for a page nobody opened. It reads through the proxy's own
        storage owner, so its forget and edit are writes of the one writer of each file."""
        if self._dashboard is None:
            from ember.ui.app import Dashboard

            self._dashboard = Dashboard(self.settings, self.storage)
            self._dashboard.stopping = lambda: self.stopping() or not self.ready
        await self._dashboard(scope, receive, send)

    async def _metrics(self, send: Send, *, head: bool) -> None:
        """The registry in Prometheus' text format, answered by ember (before, the path was
        passed through, and a scraper got the provider's 404). No key is asked for: it is as
        reachable as the proxy itself (this machine; another only with ``proxy_token``), and
        holds counts and model names, never content. Rendered on the loop: the labels are bounded
        (``ember.metrics``), and the largest registry they allow, a few hundred series, takes
        a few milliseconds once per scrape."""
        body = generate_latest(self.metrics)
        headers = [
            (b"content-type", CONTENT_TYPE_LATEST.encode()),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if head else body})

    def _health(self) -> bytes:
        """``{"status": "ok"}`` while serving; a database that was switched off is listed
        under ``storage`` (requests still flow: only that project's features are off), a
        provider the last requests could not reach under ``upstream``."""
        problems = self.storage.problems()
        unreached = self.flow.reach.problems()
        if not problems and not unreached:
            return _HEALTH_OK
        detail: dict[str, Any] = {"status": "ok"}
        if problems:
            detail["storage"] = [h.to_json() for h in problems]
        if unreached:
            detail["upstream"] = [u.to_json() for u in unreached]
        return json.dumps(detail).encode()

    def _url(self, adapter: ProtocolAdapter, path: str, query: str) -> str:
        return self.settings.provider_url(adapter.name, path, query)

    # -- one exchange -----------------------------------------------------------------------

    async def _relay_exchange(
        self, ex: Exchange, headers: list[tuple[str, str]], receive: Receive, send: Send
    ) -> None:
        await self.flow.prepare(ex)
        if ex.refusal is not None:
            await self._refuse(ex, ex.refusal, send)
            return
        try:
            relayed = await self._relay(ex, headers, receive, self.flow.announcing(ex, send))
        except BaseException:
            self.flow.abandon(ex)
            raise
        self.flow.finish(ex, relayed)

    async def _refuse(self, ex: Exchange, refusal: Refusal, send: Send) -> None:
        """Answer with the stage's error in the protocol's shape; accounted like any answer
        (status, no tokens), the provider never asked."""
        extra = [(b"x-should-retry", b"false")]
        if refusal.retry_after is not None:
            extra.append((b"retry-after", str(max(1, round(refusal.retry_after))).encode()))
        body = ex.adapter.error_body(refusal.status, refusal.message)
        await send_json(send, refusal.status, body, extra=extra)
        self.flow.finish(ex, answered_refusal(refusal, body))

    async def _relay(
        self, ex: Exchange, headers: list[tuple[str, str]], receive: Receive, send: Send
    ) -> Delivered:
        url = self._url(ex.adapter, ex.path, ex.query)
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

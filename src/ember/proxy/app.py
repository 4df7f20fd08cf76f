"""The proxy as an ASGI application: its lifecycle, and each request handed to its route.

What is served where is a list of routes (``proxy.routes``) that ``ember.compose`` assembles
in one place: the app answers ``GET /healthz`` (once it is started), ``GET /metrics`` (the
app's registry in Prometheus' text format: the kernel's metrics and what each stage
registered) and ``GET /`` itself; its ``exchanges`` serve the model endpoints through the
pipeline and pass every other request through untouched to the provider its headers point at
(``proxy.http_exchange``); its ``responses_socket`` serves Responses over WebSocket on
``/v1/responses`` (``proxy.websocket``). The app imports none of what else is mounted (the
dashboard comes from ``ember.compose``).

Every request and WebSocket upgrade first passes ``ember.hosts``'s policy (``proxy.doors``)
unless its route checks its own: a ``Host`` that is not this proxy's, a web page's ``Origin``
on a request that changes state, or a peer on another machine without ``proxy_token`` is
refused in the protocol's error shape before anything is read, forwarded or recorded.

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
from ember.exchange import Services, Stage, Stopping, TaskSet
from ember.hosts import Refused
from ember.metrics import StorageCollector, new_registry
from ember.protocols.base import ProtocolAdapter
from ember.proxy.doors import Doors
from ember.proxy.flow import ExchangeFlow
from ember.proxy.http_exchange import HttpExchanges, HttpTransport
from ember.proxy.pipeline import Pipeline
from ember.proxy.relay import Receive, Send, send_json
from ember.proxy.routes import Route, Router
from ember.proxy.upstream import Upstream
from ember.proxy.websocket import ResponsesSocket, deny
from ember.sessions import SessionRegistry
from ember.store import startcheck
from ember.store.registry import Storage, storage_for
from ember.transcript_recorder import Transcripts

log = logging.getLogger(__name__)

_HEALTH_OK = b'{"status":"ok"}'
_ROOT = b'{"service":"ember"}'
_HEALTH_STARTING = b'{"status":"starting"}'

#: The routes of an app, built once its parts exist (``ember.compose.routes``).
RouteTable = Callable[["ProxyApp"], Sequence[Route]]


class ProxyApp:
    def __init__(
        self,
        settings: Settings,
        stages: Sequence[Stage] = (),
        *,
        routes: RouteTable,
        storage: Storage | None = None,
        sessions: SessionRegistry | None = None,
    ) -> None:
        """``stages`` is the whole list, accounting included, and ``routes`` every route
        (``ember.compose`` builds both)."""
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
        #: who may use the proxy (``ember.hosts``): checked before every route but those that
        #: check their own
        self.doors = Doors(settings)
        #: the model endpoints and pass-through, over HTTP
        self.exchanges = HttpExchanges(settings, self.upstream, self.flow)
        #: Responses over WebSocket
        self.responses_socket = ResponsesSocket(
            settings, self.upstream, self.flow, lambda: self.pipeline.http_only
        )
        self.router = Router(routes(self))

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
                # If the answer had already started, the connection is simply closed.
                with contextlib.suppress(Exception):
                    answer = HttpTransport(scope, receive, send, self.settings)
                    await answer.error(500, "ember: internal error")
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)

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
        route = self.router.http(scope["path"], scope["method"])
        if route is None or route.doors:
            refused = self.doors.check(scope)
            if refused is not None:
                await self._refuse_door(scope, receive, send, refused)
                return
        if route is None:  # a route table without pass-through
            answer = HttpTransport(scope, receive, send, self.settings)
            await answer.error(404, f"ember: nothing is served at {scope['path']}")
            return
        await route.endpoint(scope, receive, send)

    async def _refuse_door(
        self, scope: dict[str, Any], receive: Receive, send: Send, refused: Refused
    ) -> None:
        """A request ``ember.hosts`` refused, answered in its protocol's error shape before
        its body is read: nothing forwarded, nothing recorded. The connection is closed
        (the unread body is never read on), and the SDKs are told not to retry."""
        answer = HttpTransport(scope, receive, send, self.settings)
        await answer.error(refused.status, f"ember: {refused.message}", close=True, retry=False)

    async def _websocket(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """One client WebSocket, from its handshake to its close: the doors, then its route.
        Every refusal is an HTTP answer to the upgrade (``websocket.deny``). Never raises: a
        bug here is logged, and a handshake not yet answered is answered 500 by the server."""
        try:
            if (await receive())["type"] != "websocket.connect":
                return
            refused = self.doors.check(scope)
            if refused is not None:  # before anything is asked of the provider
                await deny(send, scope, refused.status, refused.message)
                return
            path = scope["path"]
            route = self.router.websocket(path)
            if route is None:
                served = " or ".join(self.router.websocket_paths) or "HTTP"
                await deny(send, scope, 404, f"no WebSocket endpoint at {path}; use {served}")
                return
            await route.endpoint(scope, receive, send)
        except OSError:  # the client went away before its handshake was answered
            return
        except Exception:
            log.exception("unexpected error serving a WebSocket on %s", scope.get("path"))

    # -- what the proxy answers itself ------------------------------------------------------

    async def health(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """``GET /healthz``: 200 with ``_health`` once started, 503 until then."""
        status, body = (200, self._health()) if self.ready else (503, _HEALTH_STARTING)
        await send_json(send, status, body)

    async def root(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """``GET /``: Claude Code checks it can reach its base URL with a bare ``HEAD /`` (no
        key, no version header): ember answers it; forwarding it guessed a provider at
        random."""
        await send_json(send, 200, _ROOT)

    async def metrics_page(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        await self._metrics(send, head=scope["method"] == "HEAD")

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
        return adapter.upstream_url(self.settings, path, query)

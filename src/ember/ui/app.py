"""The dashboard as an ASGI app under ``/ui``: the page, the kernel's JSON, the features' views
and the live feed. ``ember ui`` serves it alone; the proxy serves the same app at ``/ui``.

Every handler's reads run in a worker thread (SQLite blocks): the proxy's event loop keeps
forwarding requests while a page loads a year of spend. A failing read is a JSON error for
the page, never a broken proxy.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, MutableMapping, Sequence
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ember.config import Settings
from ember.errors import EmberError
from ember.savings import OutputRates
from ember.store.accounting import savings_rows
from ember.store.registry import Storage
from ember.ui import data, guard, savings
from ember.ui.home import HomeReader
from ember.views import Query, ViewContext, ViewError
from ember.views import Route as ViewRoute

log = logging.getLogger(__name__)

PREFIX = "/ui"
FRAMES = list(guard.FRAME_HEADERS)
#: How often the live feed looks for new writes, and the longest one feed connection lasts
#: (the browser reconnects by itself): a stopping server never waits on a page left open.
POLL_SECONDS = 1.0
FEED_SECONDS = 60.0


class Dashboard:
    """The app and what it reads with. ``views``: the features' JSON routes by feature name
    (``ember.compose.Spec.views``). ``stopping``: true once the server is shutting down (the
    live feed ends at once)."""

    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        views: Mapping[str, Sequence[ViewRoute]],
    ) -> None:
        self.settings = settings
        self.storage = storage
        self.token = guard.new_token()
        self.doors = guard.policy(settings)
        self.reader = HomeReader(settings.home, storage)
        self.context = ViewContext(settings, storage)
        self.views = views
        self.stopping: Callable[[], bool] = lambda: False
        static = resources.files("ember.ui") / "static"
        self.app = Starlette(
            routes=[
                Route(PREFIX, self.page),
                Route(PREFIX + "/", self.page),
                Mount(PREFIX + "/static", StaticFiles(directory=str(static)), name="static"),
                Route(PREFIX + "/api/projects", self.api_projects),
                Route(PREFIX + "/api/spend", self.api_spend),
                Route(PREFIX + "/api/savings", self.api_savings),
                Route(PREFIX + "/api/sessions", self.api_sessions),
                Route(PREFIX + "/api/requests", self.api_requests),
                Route(PREFIX + "/api/features", self.api_features),
                Route(PREFIX + "/api/events", self.api_events),
                Route(
                    PREFIX + "/api/f/{feature}/{path:path}",
                    self.api_feature,
                    methods=["GET", "POST"],
                ),
            ],
            # a bad parameter read outside a worker (?days=abc) is the same JSON error
            exception_handlers={ViewError: _refused},
        )

    def warm(self) -> None:
        """Open every project's database and read its totals now (blocking: call it from a
        thread as the server starts): the first open of a file in a process costs ~0.3 s
        (the driver, the vector extension), which the user's first paint would pay."""
        try:
            self.reader.overview()
        except Exception:  # a damaged file is reported by the page when it asks
            log.debug("dashboard warm-up failed", exc_info=True)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def framed(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *FRAMES]}
            await send(message)

        refused = self.doors.check_scope(scope, None)
        if refused is not None:
            await _error(refused.status, refused.message)(scope, receive, framed)
            return
        await self.app(scope, receive, framed)

    # -- the page ---------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        html = (resources.files("ember.ui") / "static" / "index.html").read_text("utf-8")
        html = html.replace("__EMBER_TOKEN__", self.token).replace("__EMBER_PREFIX__", PREFIX)
        return HTMLResponse(html, headers={"cache-control": "no-store"})

    # -- the kernel's data ------------------------------------------------------------------

    async def api_projects(self, request: Request) -> Response:
        return await _json(self.reader.overview)

    async def api_spend(self, request: Request) -> Response:
        q = _query(request)
        days = q.number("days", 30, 1, 366)
        by = q.params.get("by", "origin")
        if by not in data.BREAKDOWNS:
            return _error(400, f"by={by!r}: choose one of {', '.join(data.BREAKDOWNS)}")
        return await _json(lambda: self.reader.spend(days, by, q.project).to_json())

    async def api_savings(self, request: Request) -> Response:
        """What ember saved net: this week's totals and the last ``days`` day by day, each
        part beside the net, and why an empty part is empty (``ember.ui.savings``)."""
        q = _query(request)
        days = q.number("days", 30, 1, 366)
        prices = self.settings.price_table()
        return await _json(
            lambda: savings.overview(self.reader, days, q.project or None, prices, self._rates())
        )

    def _rates(self) -> OutputRates:
        return savings.output_rates(self.views, self.context)

    async def api_sessions(self, request: Request) -> Response:
        """One page of the project's sessions, newest first, with their ``total``: the page
        offers the next one rather than cut older sessions off."""
        q = _query(request)
        limit = q.number("limit", 200, 1, 5000)
        offset = q.number("offset", 0, 0, 10_000_000)
        return await _json(
            lambda: self._per_project(q, lambda c: data.session_page(c, limit, offset))
        )

    async def api_requests(self, request: Request) -> Response:
        q = _query(request)
        session = q.text("session")
        limit = q.number("limit", 2000, 1, 100_000)
        prices = self.settings.price_table()

        def read() -> list[dict[str, Any]]:
            rows: list[dict[str, Any]] = self._per_project(
                q, lambda c: data.requests(c, session, limit)
            )
            for row in rows:  # what a token of fresh input costs: an injected block's price
                price = prices.lookup(row["model"])
                row["input_usd_per_mtok"] = price.input if price is not None else None
            whole = self._per_project(q, lambda c: savings_rows(c, session_id=session))
            savings.per_request(rows, whole, prices, self._rates())
            return rows

        return await _json(read)

    def _per_project(self, q: Query, fn: Callable[[Any], Any]) -> Any:
        name = q.needs_project()
        project = self.reader.find(name)
        if project is None:
            raise ViewError(404, f"no project named {name!r} in {self.settings.home}")
        return self.reader.read(project, fn)

    async def api_features(self, request: Request) -> Response:
        listed = {
            name: [{"method": r.method, "path": r.path, "writes": r.writes} for r in routes]
            for name, routes in self.views.items()
        }
        return JSONResponse(listed)

    # -- the features' views ----------------------------------------------------------------

    async def api_feature(self, request: Request) -> Response:
        feature, path = request.path_params["feature"], request.path_params["path"]
        route = next(
            (
                r
                for r in self.views.get(feature, ())
                if r.path == path and r.method == request.method
            ),
            None,
        )
        if route is None:
            return _error(404, f"no view {request.method} {feature}/{path}")
        if route.writes and not guard.token_ok(self.token, request.headers.get("x-ember-token")):
            return _error(
                403, "this changes data: reload the dashboard (its token is missing or stale)"
            )
        body: dict[str, Any] = {}
        if request.method == "POST":
            try:
                body = json.loads(await request.body() or b"{}")
            except ValueError:
                return _error(400, "the body must be a JSON object")
            if not isinstance(body, dict):
                return _error(400, "the body must be a JSON object")
        q = _query(request, body)
        return await _json(lambda: route.handler(self.context, q))

    # -- live -------------------------------------------------------------------------------

    async def api_events(self, request: Request) -> Response:
        return StreamingResponse(
            self._feed(request),
            media_type="text/event-stream",
            headers={"cache-control": "no-store"},
        )

    async def _feed(self, request: Request) -> AsyncIterator[str]:
        """One ``change`` event per project whose files changed since the last look, as
        ``{"project": name}``; ends after ``FEED_SECONDS`` or when the server stops."""
        yield "retry: 1000\n\n"
        seen = await run_in_threadpool(self._stamps)
        ends = time.monotonic() + FEED_SECONDS
        while time.monotonic() < ends and not self.stopping():
            await asyncio.sleep(POLL_SECONDS)
            if await request.is_disconnected():
                return
            now = await run_in_threadpool(self._stamps)
            for name, stamp in now.items():
                if seen.get(name) != stamp:
                    yield f"event: change\ndata: {json.dumps({'project': name})}\n\n"
            seen = now

    def _stamps(self) -> dict[str, tuple[float, ...]]:
        return {p.name: self.reader.stamp(p) for p in self.reader.projects()}


def _query(request: Request, body: dict[str, Any] | None = None) -> Query:
    params = dict(request.query_params)
    project = (body or {}).get("project") or params.get("project")
    return Query(project if isinstance(project, str) else None, params, body or {})


async def _refused(request: Request, exc: Exception) -> Response:
    status = exc.status if isinstance(exc, ViewError) else 500
    return _error(status, str(exc))


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _json(fn: Callable[[], Any]) -> Response:
    """``fn()`` in a worker thread, as JSON; a refusal or a storage failure as an error the
    page shows."""
    try:
        return JSONResponse(await run_in_threadpool(fn))
    except ViewError as exc:
        return _error(exc.status, str(exc))
    except EmberError as exc:
        log.warning("dashboard read failed: %s", exc)
        return _error(503, str(exc))

"""Which handler answers a request: the routes, as data.

``ember.compose`` lists every route ``ember proxy`` serves in one place (what the proxy answers
itself, the model endpoints, the Responses WebSocket, the dashboard, and pass-through for the
rest); the app finds the route of each request here and calls its handler. A new endpoint is a
line in that list, never a branch in the app.

Invariants:
- The first route in the list whose path and method both match answers. A route whose path
  matches but not the method is passed over: ``GET /v1/messages`` or ``POST /healthz`` go on
  to the provider (pass-through), as they always did, instead of a 405 from ember.
- A route is behind the proxy's doors (``proxy.doors``: ``Host``, ``Origin``, the token)
  unless it says it checks its own (``doors=False``: the dashboard, with stricter peers); the
  app checks them before calling the handler, so no handler can forget to.
- HTTP routes answer HTTP requests only and WebSocket routes WebSocket upgrades only: the
  dashboard's mount never receives an upgrade, the pass-through never a socket.

Paths: exact (``/healthz``), a pattern whose ``{name}`` stands for one path segment
(``/v1beta/models/{model}:generateContent``), or a mount (the path and everything under it;
``Mount("")`` is every path).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Collection, Sequence
from functools import cached_property
from typing import Any, Literal

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
#: An ASGI application: what a route calls.
Endpoint = Callable[[Scope, Receive, Send], Awaitable[None]]

_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def compile_path(path: str) -> re.Pattern[str] | None:
    """The pattern of a path with ``{name}`` segments, or None for an exact path."""
    if "{" not in path:
        return None
    parts, at = [], 0
    for m in _PARAM.finditer(path):
        parts.append(re.escape(path[at : m.start()]))
        parts.append(f"(?P<{m.group(1)}>[^/]+)")
        at = m.end()
    parts.append(re.escape(path[at:]))
    return re.compile("".join(parts))


class Route:
    """An HTTP route: a path (exact or a pattern), the methods it answers (None: any), its
    handler, and whether it is behind the proxy's doors."""

    kind: Literal["http", "websocket"] = "http"

    def __init__(
        self,
        path: str,
        endpoint: Endpoint,
        *,
        methods: Collection[str] | None = None,
        doors: bool = True,
    ) -> None:
        self.path = path
        self.endpoint = endpoint
        self.methods = frozenset(methods) if methods is not None else None
        self.doors = doors
        self._pattern = compile_path(path)

    def matches_path(self, path: str) -> bool:
        if self._pattern is None:
            return path == self.path
        return self._pattern.fullmatch(path) is not None

    def matches(self, path: str, method: str) -> bool:
        if self.methods is not None and method not in self.methods:
            return False
        return self.matches_path(path)

    def __repr__(self) -> str:
        methods = ",".join(sorted(self.methods)) if self.methods is not None else "*"
        return f"{type(self).__name__}({self.path!r}, {methods})"


class Mount(Route):
    """``path`` and every path under it, any method unless ``methods`` says."""

    @cached_property
    def _under(self) -> str:
        return self.path.rstrip("/") + "/"

    def matches_path(self, path: str) -> bool:
        return path == self.path or path.startswith(self._under)


class WebSocketRoute(Route):
    """A WebSocket endpoint at an exact path, always behind the doors. Its handler is called
    once the client's ``websocket.connect`` was received and the doors let it in."""

    kind: Literal["http", "websocket"] = "websocket"

    def __init__(self, path: str, endpoint: Endpoint) -> None:
        super().__init__(path, endpoint)


class Router:
    """The routes of one app, looked up in their order."""

    def __init__(self, routes: Sequence[Route]) -> None:
        self.routes = tuple(routes)
        self._http = tuple(r for r in self.routes if r.kind == "http")
        self._websocket = tuple(r for r in self.routes if r.kind == "websocket")

    def http(self, path: str, method: str) -> Route | None:
        """The first HTTP route matching ``method`` on ``path``, or None."""
        for route in self._http:
            if route.matches(path, method):
                return route
        return None

    def websocket(self, path: str) -> Route | None:
        for route in self._websocket:
            if route.matches_path(path):
                return route
        return None

    @property
    def websocket_paths(self) -> list[str]:
        return [r.path for r in self._websocket]

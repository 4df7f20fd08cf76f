"""Where the app is built: the registered features' stages (``ember.features``, in their
order), accounting last so it sees the final outcome, one storage and one session registry,
and every route the proxy serves (``routes``), in one list.

The proxy imports no feature and no feature imports the proxy; a new feature registers itself
and nothing here or in the proxy changes. The proxy does not import the dashboard either: its
route is added here. Library mode (``shadow_library``) is built here too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from ember.accounting import AccountingStage
from ember.config import Settings
from ember.exchange import Stage
from ember.features import Composition
from ember.features import stages as feature_stages
from ember.memory.router import MemoryRouter
from ember.protocols import ENDPOINTS
from ember.proxy.app import ProxyApp
from ember.proxy.relay import Receive, Send
from ember.proxy.routes import Mount, Route, WebSocketRoute
from ember.proxy.upstream import Upstream
from ember.proxy.websocket import PATH as RESPONSES_SOCKET
from ember.session import CredentialTags
from ember.sessions import SessionRegistry
from ember.shadow.library import ShadowLibrary
from ember.store.registry import Storage, storage_for

StageFactory = Callable[[Settings, Storage], list[Stage]]


#: The public part: ``shadow_library`` (README, Library mode). The builders serve the CLI.
__all__ = ["shadow_library"]


def build_storage(settings: Settings) -> Storage:
    """The one owner of every database file this process opens."""
    return storage_for(settings)


def build_stages(settings: Settings, storage: Storage) -> list[Stage]:
    """The stages of the registered features (``ember.features``) that ``settings`` enable,
    in order (accounting comes after them)."""
    return feature_stages(Composition(settings, storage))


def build_app(
    settings: Settings, features: Sequence[Stage] | StageFactory | None = None
) -> ProxyApp:
    """The proxy as ``ember proxy`` serves it: one storage, one session registry, the
    enabled features (or the ones given), accounting last."""
    storage = build_storage(settings)
    sessions = SessionRegistry(credentials=CredentialTags.for_home(settings.home))
    if features is None:
        stages = build_stages(settings, storage)
    elif callable(features):
        stages = features(settings, storage)
    else:
        stages = list(features)
    if settings.accounting:
        stages.append(AccountingStage(storage, settings.price_table(), sessions))
    return ProxyApp(settings, stages, routes=routes, storage=storage, sessions=sessions)


#: What the proxy answers itself: reads, which a ``HEAD`` may ask too.
_READ = ("GET", "HEAD")


def routes(app: ProxyApp) -> list[Route]:
    """Every route of ``ember proxy``, the first match answering (``proxy.routes``): what the
    proxy answers itself, the model endpoints (a ``POST``; any other method is passed
    through), Responses over WebSocket, the dashboard (which checks its own doors), and
    every other request passed through to the provider."""
    return [
        Route("/healthz", app.health, methods=_READ),
        Route("/metrics", app.metrics_page, methods=_READ),
        Route("/", app.root, methods=_READ),
        *(Route(path, app.exchanges.exchange, methods=("POST",)) for path in ENDPOINTS),
        WebSocketRoute(RESPONSES_SOCKET, app.responses_socket),
        Mount("/ui", LazyDashboard(app), doors=False),
        Mount("", app.exchanges.pass_through),
    ]


class LazyDashboard:
    """The dashboard (``ember.ui``) under ``/ui``, built on its first visit: the proxy's
    start-up and memory do not pay for a page nobody opened. It reads through the proxy's own
    storage owner, so its forget and edit are writes of the one writer of each file, and its
    live feeds end when the proxy stops. It checks its own doors (the same policy, stricter
    peers)."""

    def __init__(self, app: ProxyApp) -> None:
        self.proxy = app
        self._dashboard: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if self._dashboard is None:
            from ember.ui.app import Dashboard

            proxy = self.proxy
            self._dashboard = Dashboard(proxy.settings, proxy.storage)
            self._dashboard.stopping = lambda: proxy.stopping() or not proxy.ready
        await self._dashboard(scope, receive, send)


def shadow_library(settings: Settings) -> ShadowLibrary:
    """Shadow memory for a framework that calls the model itself (``ember.shadow.library``):
    ember's own HTTP client to the provider URLs of ``settings``, one storage, and the
    project's memory stores for promoted facts. Use it as ``async with shadow_library(s):``."""
    storage = build_storage(settings)
    router = MemoryRouter(settings, None, storage=storage)
    upstream = Upstream.from_settings(settings)

    async def close() -> None:
        await upstream.close()
        await asyncio.to_thread(router.close)
        await asyncio.to_thread(storage.close)

    return ShadowLibrary(
        settings, upstream, storage=storage, memories=router.for_project, on_close=close
    )

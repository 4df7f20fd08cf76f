"""Where the app is built: the registered features' stages (``ember.features``, in their
order), accounting last so it sees the final outcome, one storage and one session registry,
and every route the proxy serves (``routes``), in one list.

The proxy imports no feature and no feature imports the proxy; a new feature registers itself
and nothing here or in the proxy changes. The proxy does not import the dashboard either: its
route is added here. Library mode (``shadow_library``) is built here too.

Only this module reads the feature registry (``ember.features.registry``): it builds one
``Spec`` from it and hands each part what it needs of it. Loading this module installs the
spec for the settings and the schemas (``ember.installed``), the parts below every feature;
the dashboard, ``ember store copy`` and the CLI get theirs as parameters. No part imports this
module: the entry points do (the CLI, the demo, library mode). Its imports are light (the
proxy's, memory's and shadow's are made in the builders) because every command loads it.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from ember import installed
from ember.config import Settings
from ember.features import Composition, Feature, Registered, registry
from ember.sections import Section
from ember.sections import models as feature_sections

if TYPE_CHECKING:
    import click

    from ember.exchange import Stage
    from ember.proxy.app import ProxyApp
    from ember.proxy.relay import Receive, Send
    from ember.proxy.routes import Route
    from ember.shadow.library import ShadowLibrary
    from ember.store.migrations import Migration
    from ember.store.registry import Storage
    from ember.views import Route as ViewRoute

StageFactory = Callable[[Settings, "Storage"], "list[Stage]"]
log = logging.getLogger(__name__)


#: The public part: ``shadow_library`` (README, Library mode). The builders serve the CLI.
__all__ = ["shadow_library"]


@dataclass(frozen=True)
class Spec:
    """What the registered features contribute to each part of ember, read from the registry
    once (``spec``): settings sections, tables, stages, banners, commands, dashboard views and
    ``ember store copy``'s tables. The parts get what they need of it here and never read the
    registry themselves, so a feature that cannot be loaded fails in one place and every part
    sees the same features in the same order.

    A feature's parts are built on first use (``Feature`` holds functions): reading the spec
    imports each feature's small ``feature`` module only, so ``ember mcp`` does not pay for
    the other commands nor the proxy for the dashboard."""

    #: every feature with where it came from, in pipeline order
    registered: tuple[Registered, ...]
    #: their settings, by feature name (``ember.sections``)
    sections: Mapping[str, Section]

    @property
    def features(self) -> tuple[Feature, ...]:
        """Every feature, in pipeline order."""
        return tuple(r.feature for r in self.registered)

    @property
    def not_on_postgres(self) -> tuple[str, ...]:
        """The features that do not run on a PostgreSQL store yet (``Feature.postgres``)."""
        return tuple(f.name for f in self.features if not f.postgres)

    def migrations(self, database: str, *, postgres: bool = False) -> tuple[Migration, ...]:
        """The features' migrations of ``database`` (``project`` or ``stats``), in order; with
        ``postgres``, only those of the features that run on PostgreSQL."""
        out: list[Migration] = []
        for f in self._features(postgres):
            out.extend(f.project_migrations() if database == "project" else f.stats_migrations())
        return tuple(out)

    def stages(self, comp: Composition) -> list[Stage]:
        """Every feature's stages for ``comp.settings``, in order; on a PostgreSQL store,
        only those of the features that run there (``not_on_postgres`` names the rest)."""
        out: list[Stage] = []
        for feature in self._features(comp.storage.postgres):
            comp.building = feature.name
            out.extend(feature.stages(comp))
        return out

    def banners(self, settings: Settings) -> list[str]:
        """What the features say when the proxy starts, in order."""
        return [line for f in self.features if (line := f.banner(settings))]

    def commands(self) -> list[click.Command]:
        """Every feature's CLI commands."""
        return [command for f in self.features for command in f.commands()]

    def command_named(self, name: str) -> click.Command | None:
        """The feature command ``name`` when a feature declares it by reference
        (``Feature.command_refs``), imported alone; None otherwise (build ``commands()``)."""
        for f in self.features:
            reference = f.command_refs.get(name)
            if reference is not None:
                module_name, _, attribute = reference.partition(":")
                command: click.Command = getattr(importlib.import_module(module_name), attribute)
                return command
        return None

    def views(self) -> dict[str, tuple[ViewRoute, ...]]:
        """Each feature's dashboard views, by feature name; a feature whose views fail to
        load is logged and left out (a plugin must not take the dashboard down)."""
        out = {}
        for f in self.features:
            try:
                routes = tuple(f.views())
            except Exception:
                log.exception("the views of feature %s could not be loaded", f.name)
                continue
            if routes:
                out[f.name] = routes
        return out

    def _features(self, postgres: bool) -> list[Feature]:
        return [f for f in self.features if not postgres or f.postgres]


@cache
def spec() -> Spec:
    """The features' spec, read from the registry the first time (``FeatureError`` naming
    the feature that cannot be loaded, or whose name or settings clash)."""
    features = registry()
    return Spec(features, feature_sections(features, core=set(Settings.model_fields)))


#: Loading the composition root hands the settings and the schemas the features' parts
#: (``ember.installed``): read through ``spec`` on each use, so still on first use only.
installed.install(spec)


def build_storage(settings: Settings) -> Storage:
    """The one owner of every database file this process opens."""
    from ember.store.registry import storage_for

    return storage_for(settings)


def build_stages(settings: Settings, storage: Storage) -> list[Stage]:
    """The stages of the registered features (``ember.features``) that ``settings`` enable,
    in order (accounting comes after them)."""
    return spec().stages(Composition(settings, storage))


def build_app(
    settings: Settings, features: Sequence[Stage] | StageFactory | None = None
) -> ProxyApp:
    """The proxy as ``ember proxy`` serves it: one storage, one session registry, the
    enabled features (or the ones given), accounting last."""
    from ember.accounting_stage import AccountingStage
    from ember.proxy.app import ProxyApp
    from ember.session import CredentialTags
    from ember.sessions import SessionRegistry

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
    from ember.protocols import ENDPOINTS
    from ember.proxy.routes import Mount, Route, WebSocketRoute
    from ember.proxy.websocket import PATH as RESPONSES_SOCKET

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
            self._dashboard = Dashboard(proxy.settings, proxy.storage, spec().views())
            self._dashboard.stopping = lambda: proxy.stopping() or not proxy.ready
        await self._dashboard(scope, receive, send)


def shadow_library(settings: Settings) -> ShadowLibrary:
    """Shadow memory for a framework that calls the model itself (``ember.shadow.library``):
    ember's own HTTP client to the provider URLs of ``settings``, one storage, and the
    project's memory stores for promoted facts. Use it as ``async with shadow_library(s):``."""
    from ember.memory.router import MemoryRouter
    from ember.proxy.upstream import Upstream
    from ember.shadow.library import ShadowLibrary

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

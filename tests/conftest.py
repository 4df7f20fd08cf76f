"""Shared fixtures: the provider emulator and the real proxy, each served on loopback; a real
PostgreSQL with pgvector (issue #24), started once per run when a test asks for it."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import weakref
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from ember.compose import build_app
from ember.config import Settings, load_settings
from ember.exchange import Stage
from ember.proxy.app import ProxyApp
from ember.server import BackgroundServer
from ember.store.registry import Storage
from ember.testing import Emulator
from ember.testing.postgres import ENV_REQUIRED, PgServer, PostgresUnavailable, postgres_server


@pytest.fixture(scope="session", autouse=True)
def _models_cache_of_the_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Built embedder graphs go to a cache of this test run, never the user's own (the default
    models cache is per user: $XDG_CACHE_HOME/ember/models)."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(cache))
        yield cache


def _http_client_classes() -> list[type]:
    """The synchronous HTTP clients the SDKs are built on (``httpx2`` in the current SDKs,
    ``httpx`` in older ones), of those installed."""
    found = []
    for name in ("httpx2", "httpx"):
        with contextlib.suppress(ImportError):
            found.append(importlib.import_module(name).Client)
    return found


_HTTP_CLIENTS = _http_client_classes()


@pytest.fixture(autouse=True)
def _http_clients_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every synchronous HTTP client a test made (the ``anthropic``, ``openai`` and
    ``google-genai`` SDKs' among them) is closed when the test ends. One left open kept its
    pooled socket until the garbage collector found it, in whichever test ran then: a
    ResourceWarning (an error here) charged to a test that had nothing to do with it. Clients
    of wider-scoped fixtures are made before this runs and are left alone."""
    made: weakref.WeakSet[Any] = weakref.WeakSet()
    for cls in _HTTP_CLIENTS:
        monkeypatch.setattr(cls, "__init__", _tracking(cls.__init__, made))
    yield
    for client in list(made):
        with contextlib.suppress(Exception):
            client.close()


def _tracking(init: Callable[..., None], made: weakref.WeakSet[Any]) -> Callable[..., None]:
    def tracked(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.add(self)

    return tracked


@dataclass
class Stack:
    """The emulator behind the real proxy, both served by uvicorn on loopback."""

    emulator: Emulator
    upstream_url: str
    app: ProxyApp
    proxy: BackgroundServer
    home: Path

    @property
    def url(self) -> str:
        return self.proxy.url

    def settle(self) -> None:
        """Wait until every response stage has run and accounting is on disk."""
        assert self.proxy.loop is not None
        asyncio.run_coroutine_threadsafe(self.app.drain(), self.proxy.loop).result(10)
        self.app.storage.flush(10)


StackFactory = Callable[..., Stack]
StageFactory = Callable[[Settings, Storage], list[Stage]]


@pytest.fixture
def make_stack(tmp_path: Path) -> Iterator[StackFactory]:
    with ExitStack() as resources:

        def make(
            stages: list[Stage] | tuple[()] | Literal["features"] | StageFactory = (),
            upstream: str | None = None,
            emulator: Emulator | None = None,
            **overrides: Any,
        ) -> Stack:
            emu = emulator or Emulator()
            if upstream is None:
                upstream = resources.enter_context(BackgroundServer(emu)).url
            # Shadow memory makes calls of its own after turns: off unless a test asks for it;
            # when asked for, a session is read once it has been quiet a moment (not the
            # shipped minute), and a stopping test proxy does not wait to read what is unread.
            overrides.setdefault("shadow", "off")
            overrides.setdefault("shadow_idle_seconds", 0.3)
            overrides.setdefault("shadow_stop_seconds", 0.0)
            settings = load_settings(
                env={"EMBER_HOME": str(tmp_path / "home")},
                anthropic_url=upstream,
                openai_url=upstream + "/v1",
                gemini_url=overrides.pop("gemini_url", upstream),
                **overrides,
            )
            features = None if stages == "features" else stages
            app = build_app(settings, features)  # type: ignore[arg-type]
            proxy = resources.enter_context(BackgroundServer(app))
            return Stack(emu, upstream, app, proxy, settings.home)

        yield make


@pytest.fixture
def stack(make_stack: StackFactory) -> Stack:
    """A bare proxy (accounting only): pure pass-through, for the foundation's tests."""
    return make_stack()


@pytest.fixture
def full_stack(make_stack: StackFactory) -> Stack:
    """The proxy with every feature stage the settings enable, as `ember proxy` builds it."""
    return make_stack(stages="features")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL 16 with pgvector for the run (``$EMBER_TEST_PG_URL``'s, or a throwaway
    one, stopped and removed at the end); the tests skip, saying why, when none can be had."""
    with ExitStack() as stack:
        try:
            server = stack.enter_context(postgres_server())
        except PostgresUnavailable as why:
            if os.environ.get(ENV_REQUIRED):
                pytest.fail(f"{ENV_REQUIRED} is set and there is no PostgreSQL: {why}")
            pytest.skip(f"no PostgreSQL for these tests: {why}")
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A database of this test's own on ``pg_server``, with pgvector, dropped afterwards."""
    with pg_server.fresh_database() as url:
        yield url

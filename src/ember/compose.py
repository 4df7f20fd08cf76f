"""Where the app is built: which stages, in which order, sharing which services.

The only module that knows both the proxy and the features. Order matters for the cache:
stages that edit stable content (the system tail) run before stages that edit volatile content
(the latest user turn), and accounting runs last so it sees the final outcome. A new feature
adds its stage here; nothing in the proxy changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from ember.accounting import AccountingStage
from ember.config import Settings
from ember.exchange import Stage
from ember.learn.toin.stage import ToinStage
from ember.memory.router import MemoryRouter
from ember.memory.stage import MemoryStage
from ember.proxy.app import ProxyApp
from ember.proxy.upstream import Upstream
from ember.sessions import SessionRegistry
from ember.shadow.library import ShadowLibrary
from ember.shadow.stage import ShadowStage
from ember.shaping.stage import ShapingStage
from ember.store.registry import Storage, storage_for
from ember.traffic.stage import TrafficStage

StageFactory = Callable[[Settings, Storage], list[Stage]]


#: The public part: ``shadow_library`` (README, Library mode). The builders serve the CLI.
__all__ = ["shadow_library"]


def build_storage(settings: Settings) -> Storage:
    """The one owner of every database file this process opens."""
    return storage_for(settings)


def build_stages(settings: Settings, storage: Storage) -> list[Stage]:
    """The feature stages ``settings`` enable, in order (accounting comes after them)."""
    stages: list[Stage] = []
    # Output shaping first: it edits the stable system tail. It is there even with
    # EMBER_OUTPUT_SHAPING=false, to record the unshaped baseline (it edits nothing then).
    stages.append(ShapingStage(settings))
    # Memory next: it edits the tail of the latest user ask (auto_tail) or offers its tools.
    memory = MemoryStage(settings, storage) if settings.memory_mode != "off" else None
    if memory is not None:
        stages.append(memory)
    # The features that learn come after the edits: they read the exchange as it went
    # upstream (the kernel's transcript records it once for all of them), and hand what they
    # find to the same memory stores the memory stage reads.
    if settings.shadow != "off" or settings.traffic_learning:
        router = (
            memory.router if memory is not None else MemoryRouter(settings, None, storage=storage)
        )
        if settings.shadow != "off":
            stages.append(ShadowStage(settings, memories=router.for_project))
        if settings.traffic_learning:
            stages.append(TrafficStage(settings, memories=router.for_project))
    # TOIN last among the features: it only reads, and sees the request as it goes upstream.
    if settings.toin:
        stages.append(ToinStage(storage))
    return stages


def build_app(
    settings: Settings, features: Sequence[Stage] | StageFactory | None = None
) -> ProxyApp:
    """The proxy as ``ember proxy`` serves it: one storage, one session registry, the
    enabled features (or the ones given), accounting last."""
    storage = build_storage(settings)
    sessions = SessionRegistry()
    if features is None:
        stages = build_stages(settings, storage)
    elif callable(features):
        stages = features(settings, storage)
    else:
        stages = list(features)
    if settings.accounting:
        stages.append(AccountingStage(storage, settings.price_table(), sessions))
    return ProxyApp(settings, stages, storage=storage, sessions=sessions)


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

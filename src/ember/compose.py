"""Where the app is built: the registered features' stages (``ember.features``, in their
order), accounting last so it sees the final outcome, one storage and one session registry.

The proxy imports no feature and no feature imports the proxy; a new feature registers itself
and nothing here or in the proxy changes. Library mode (``shadow_library``) is built here too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from ember.accounting import AccountingStage
from ember.config import Settings
from ember.exchange import Stage
from ember.features import Composition
from ember.features import stages as feature_stages
from ember.memory.router import MemoryRouter
from ember.proxy.app import ProxyApp
from ember.proxy.upstream import Upstream
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

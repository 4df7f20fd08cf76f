"""The stages a proxy is built with, in order.

Order matters for the cache: stages that edit stable content (the system tail) run before
stages that edit volatile content (the latest user turn), and accounting runs last so it sees
the final outcome. Each feature adds its stage here; nothing else in the proxy changes.
"""

from __future__ import annotations

from ember.config import Settings
from ember.memory.stage import MemoryStage
from ember.proxy.app import ProxyApp
from ember.proxy.pipeline import Stage
from ember.shaping.stage import ShapingStage
from ember.store.registry import Storage


def build_storage(settings: Settings) -> Storage:
    """The one owner of every database file this process opens."""
    return Storage(settings.home, vec=settings.memory_vector_index != "hnsw")


def build_stages(settings: Settings, storage: Storage) -> list[Stage]:
    """Feature stages for ``settings`` (accounting is added by ``ProxyApp`` itself)."""
    stages: list[Stage] = []
    # Output shaping first: it edits the stable system tail. It is there even with
    # EMBER_OUTPUT_SHAPING=false, to record the unshaped baseline (it edits nothing then).
    stages.append(ShapingStage(settings))
    # Memory next: it edits the tail of the latest user ask (auto_tail) or offers its tools.
    if settings.memory_mode != "off":
        stages.append(MemoryStage(settings, storage))
    return stages


def build_app(settings: Settings) -> ProxyApp:
    """The proxy as ``ember proxy`` serves it: one storage, every enabled feature."""
    storage = build_storage(settings)
    return ProxyApp(settings, build_stages(settings, storage), storage=storage)

"""Cross-session memory: scoped, time-valid facts in one SQLite file per project.

The public API. ``MemoryRouter`` hands out one ``HierarchicalMemory`` per project (fail closed
when the project is unknown); a store adds, supersedes, deletes and searches memories with
its indexes kept consistent. Retrieval policy is pure: ``MemoryQuery`` says what to search
with, ``InjectionBudget.select`` picks what fits (1024 tokens / 10 items / score 0.21,
hard caps) and renders the READ-ONLY block with ``[id]``s (``render_block``); the same hits
give the same bytes. ``SavePayload`` is the input of the ``memory_save`` tool (facts,
entities and relationships in one call), executed by ``HierarchicalMemory.save``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ember.memory.bubbling import BUBBLE_THRESHOLD
    from ember.memory.core import HierarchicalMemory
    from ember.memory.errors import (
        MemoryError_,
        MemoryInputError,
        MemoryNotFound,
        MemoryStoreError,
        SecretRefused,
        VectorIndexUnavailable,
    )
    from ember.memory.extraction import (
        MEMORY_SAVE_DESCRIPTION,
        MEMORY_SAVE_SCHEMA,
        EntityIn,
        FactIn,
        RelationshipIn,
        SavePayload,
    )
    from ember.memory.models import (
        Evidence,
        Memory,
        MemoryFilter,
        MemoryHit,
        NewMemory,
        Scope,
        derive_scope,
    )
    from ember.memory.retrieval.injection_budget import Injection, InjectionBudget
    from ember.memory.retrieval.query import MemoryQuery
    from ember.memory.retrieval.rank import Fusion
    from ember.memory.retrieval.render import render_block
    from ember.memory.router import MemoryRouter
    from ember.memory.saving import SaveResult

#: Each public name's module, imported when the name is first used: importing a module of this
#: package (``ember.memory.feature`` for every command and the proxy, ``ember.memory.mcp_cli``
#: for ``ember mcp``) must not load the store, numpy and the indexes it may never use.
_WHERE: dict[str, str] = {
    "BUBBLE_THRESHOLD": "ember.memory.bubbling",
    "EntityIn": "ember.memory.extraction",
    "Evidence": "ember.memory.models",
    "FactIn": "ember.memory.extraction",
    "Fusion": "ember.memory.retrieval.rank",
    "HierarchicalMemory": "ember.memory.core",
    "Injection": "ember.memory.retrieval.injection_budget",
    "InjectionBudget": "ember.memory.retrieval.injection_budget",
    "MEMORY_SAVE_DESCRIPTION": "ember.memory.extraction",
    "MEMORY_SAVE_SCHEMA": "ember.memory.extraction",
    "Memory": "ember.memory.models",
    "MemoryError_": "ember.memory.errors",
    "MemoryFilter": "ember.memory.models",
    "MemoryHit": "ember.memory.models",
    "MemoryInputError": "ember.memory.errors",
    "MemoryNotFound": "ember.memory.errors",
    "MemoryQuery": "ember.memory.retrieval.query",
    "MemoryRouter": "ember.memory.router",
    "MemoryStoreError": "ember.memory.errors",
    "NewMemory": "ember.memory.models",
    "RelationshipIn": "ember.memory.extraction",
    "SavePayload": "ember.memory.extraction",
    "SaveResult": "ember.memory.saving",
    "Scope": "ember.memory.models",
    "SecretRefused": "ember.memory.errors",
    "VectorIndexUnavailable": "ember.memory.errors",
    "derive_scope": "ember.memory.models",
    "render_block": "ember.memory.retrieval.render",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BUBBLE_THRESHOLD",
    "MEMORY_SAVE_DESCRIPTION",
    "MEMORY_SAVE_SCHEMA",
    "EntityIn",
    "Evidence",
    "FactIn",
    "Fusion",
    "HierarchicalMemory",
    "Injection",
    "InjectionBudget",
    "Memory",
    "MemoryError_",
    "MemoryFilter",
    "MemoryHit",
    "MemoryInputError",
    "MemoryNotFound",
    "MemoryQuery",
    "MemoryRouter",
    "MemoryStoreError",
    "NewMemory",
    "RelationshipIn",
    "SavePayload",
    "SaveResult",
    "Scope",
    "SecretRefused",
    "VectorIndexUnavailable",
    "derive_scope",
    "render_block",
]

"""Cross-session memory: scoped, time-valid facts in one SQLite file per project.

The public API. ``MemoryRouter`` hands out one ``HierarchicalMemory`` per project (fail closed
when the project is unknown); a store adds, supersedes, deletes and searches memories with
its indexes kept consistent. Retrieval policy is pure: ``MemoryQuery`` says what to search
with, ``InjectionBudget.select`` picks what fits (1024 tokens / 10 items / score 0.21,
hard caps) and renders the READ-ONLY block with ``[id]``s (``render_block``); the same hits
give the same bytes. ``SavePayload`` is the input of the ``memory_save`` tool (facts,
entities and relationships in one call), executed by ``HierarchicalMemory.save``.
"""

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
from ember.memory.retrieval.budget import Injection, InjectionBudget
from ember.memory.retrieval.query import MemoryQuery
from ember.memory.retrieval.rank import Fusion
from ember.memory.retrieval.render import render_block
from ember.memory.router import MemoryRouter
from ember.memory.saving import SaveResult

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

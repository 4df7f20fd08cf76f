"""What each write of ``HierarchicalMemory`` changes, as a job for its one transaction.

A write has two halves. Before the transaction the caller's input is validated here
(``edits``, ``successor``, ``save_items``) and the coordinator embeds the new text, so a bad
field fails, and a slow model waits, before the writer thread is taken. Inside the
transaction a ``job(conn, index)`` built here makes every change of that write through
``Upkeep`` (row, evidence, FTS, vector, user-wide copy): the write commits whole or not at
all. ``update`` and ``supersede`` re-read the row in their job instead of trusting the read
before it, since another process may have written in between; a row gone by then is
``MemoryNotFound`` and nothing is written.

Nothing here touches the LRU cache: the coordinator updates it after the commit, once the
job's result is stored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

from ember.memory import bubbling, rows
from ember.memory.drafting import clean_id
from ember.memory.errors import MemoryInputError, MemoryNotFound
from ember.memory.extraction import SavePayload
from ember.memory.index.base import VectorIndex, Vectors
from ember.memory.models import Evidence, Memory, NewMemory, content_hash
from ember.memory.saving import store_graph
from ember.memory.upkeep import Upkeep
from ember.store.driver import Connection

T = TypeVar("T")
#: A write job: run on the writer's connection inside ``HierarchicalMemory._transact``.
Job: TypeAlias = Callable[[Connection, VectorIndex | None], T]
#: Caller input to a validated ``Memory`` with a fresh id (``HierarchicalMemory._materialise``).
Materialise = Callable[[NewMemory], Memory]
#: The fields a superseding fact takes from the fact it replaces, unless given.
INHERITED = ("user_id", "session_id", "agent_id", "turn_id", "category", "importance")


def require(conn: Connection, memory_id: str, where: Path) -> tuple[int, Memory]:
    """The row of ``memory_id`` (seq and memory); ``MemoryNotFound`` naming the store if none."""
    found = rows.by_id(conn, memory_id)
    if found is None:
        raise MemoryNotFound(f"no memory with id {memory_id!r} in {where}")
    return found


# -- add: new facts -------------------------------------------------------------------------------


def add_job(
    upkeep: Upkeep,
    memories: Sequence[Memory],
    vectors: Vectors | None,
    items: Sequence[NewMemory],
    dedup: bool,
) -> Job[list[Memory]]:
    """Insert the drafted ``memories`` (with ``items``' evidence), each bubbled user-wide when
    it qualifies; with ``dedup``, a fact already current in the same scope is returned
    instead of stored twice."""

    def job(conn: Connection, index: VectorIndex | None) -> list[Memory]:
        return upkeep.insert_all(conn, index, memories, vectors, items, dedup)

    return job


# -- update: a correction in place ---------------------------------------------------------------


def edits(
    old: Memory,
    materialise: Materialise,
    *,
    content: str | None,
    importance: float | None,
    category: str | None,
    metadata: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The fields an update changes, validated as ``add`` validates them (content that only
    differs by surrounding blanks is no change: the row, its FTS entry and its vector stay)."""
    changes: dict[str, Any] = {}
    if content is not None and content.strip() != old.content:
        changes["content"] = materialise(NewMemory(content)).content
        changes["content_hash"] = content_hash(changes["content"])
    if importance is not None:
        materialise(NewMemory(old.content, importance=importance))
        changes["importance"] = float(importance)
    if category is not None:
        changes["category"] = clean_id(category)
    if metadata is not None:
        changes["metadata"] = dict(metadata)
    return changes


def update_job(
    upkeep: Upkeep, where: Path, memory_id: str, changes: Mapping[str, Any], vec: Vectors | None
) -> Job[Memory]:
    """Apply ``changes`` to the row; new content is re-indexed (FTS and vector) while the
    memory is current, and a memory that now qualifies is bubbled user-wide unless a copy
    already is."""

    def job(conn: Connection, index: VectorIndex | None) -> Memory:
        seq, old = require(conn, memory_id, where)
        if changes:
            rows.set_fields(conn, seq, **changes)
        new = dataclasses.replace(old, **changes)
        if "content" in changes and new.is_current:
            upkeep.reindex_content(conn, index, seq, new, vec)
        if bubbling.should_bubble(new, upkeep.bubble_threshold) and not rows.has_copy(conn, new.id):
            upkeep.bubble(conn, index, new, upkeep.stored_vector(conn, seq))
        return new

    return job


# -- supersede: a fact that changed, the old one kept as history ----------------------------------


def successor(
    old: Memory, content: str, fields: Mapping[str, Any], materialise: Materialise
) -> Memory:
    """The fact replacing ``old``: its scope, category, importance and metadata unless
    ``fields`` gives them. Only a current fact can be superseded: superseding history would
    fork the chain into two current versions."""
    if not old.is_current:
        raise MemoryInputError(
            f"memory {old.id} was already superseded by {old.superseded_by}; "
            "supersede the current version instead"
        )
    inherit = {k: getattr(old, k) for k in INHERITED}
    inherit["metadata"] = old.metadata
    new = materialise(NewMemory(content, **{**inherit, **fields}))
    return dataclasses.replace(new, supersedes=old.id)


def supersede_job(
    upkeep: Upkeep, where: Path, memory_id: str, new: Memory, vec: Vectors | None
) -> Job[Memory]:
    """Insert ``new`` (bubbled when it qualifies), close the old row and every user-wide copy
    promoted from it, each pointing at its successor: the outdated version cannot live on at
    the user scope."""

    def job(conn: Connection, index: VectorIndex | None) -> Memory:
        seq, old = require(conn, memory_id, where)
        stored = upkeep.insert(conn, index, new, vec)
        copy = None
        if bubbling.should_bubble(stored, upkeep.bubble_threshold):
            copy = upkeep.bubble(conn, index, stored, vec)
        upkeep.close(conn, index, seq, stored.id)
        for c_seq, _ in rows.current_copies(conn, old.id):
            upkeep.close(conn, index, c_seq, copy.id if copy else stored.id)
        return stored

    return job


# -- delete: gone for good ------------------------------------------------------------------------


def delete_job(upkeep: Upkeep, memory_id: str) -> Job[list[str]]:
    """Delete the row and the user-wide copies promoted from it (the same fact), each out of
    the indexes first; the ids deleted (empty when there was no such memory)."""

    def job(conn: Connection, index: VectorIndex | None) -> list[str]:
        found = rows.by_id(conn, memory_id)
        if found is None:
            return []
        targets = [found, *rows.current_copies(conn, memory_id)]
        for seq, _ in targets:
            upkeep.unindex(conn, index, seq)
            rows.delete(conn, seq)
        return [m.id for _, m in targets]

    return job


# -- save: one memory_save call -------------------------------------------------------------------


def save_items(
    payload: SavePayload, evidence: Sequence[Evidence], scope: Mapping[str, str | None]
) -> list[NewMemory]:
    """One ``NewMemory`` per fact of the call, each in ``scope`` and carrying ``evidence``."""
    return [
        NewMemory(
            f.content,
            importance=f.importance,
            category=f.category,
            evidence=tuple(evidence),
            **scope,  # type: ignore[arg-type]
        )
        for f in payload.facts
    ]


def save_job(
    upkeep: Upkeep,
    payload: SavePayload,
    memories: Sequence[Memory],
    vectors: Vectors | None,
    items: Sequence[NewMemory],
    clock: Callable[[], float],
) -> Job[tuple[list[Memory], list[str]]]:
    """The facts (deduplicated, bubbled like ``add``), then the entities and relationships
    linked to the facts as stored, dated when the transaction runs: the saved facts and the
    entity names."""

    def job(conn: Connection, index: VectorIndex | None) -> tuple[list[Memory], list[str]]:
        saved = upkeep.insert_all(conn, index, memories, vectors, items, True)
        return saved, store_graph(conn, payload, saved, clock())

    return job


# -- touch: a search's hits counted as accessed ----------------------------------------------------


def touch_job(ids: Sequence[str], now: float) -> Callable[[Connection], None]:
    """Count the memories ``ids`` as accessed at ``now``. It touches no index, so it needs no
    vector index and may be queued with the writer's other work (``Database.submit``); a
    memory deleted meanwhile is skipped."""

    def job(conn: Connection) -> None:
        marks = ",".join("?" * len(ids))
        seqs = [
            int(r[0]) for r in conn.execute(f"SELECT seq FROM memories WHERE id IN ({marks})", ids)
        ]
        rows.touch(conn, seqs, now)

    return job

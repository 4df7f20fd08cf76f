"""Turning caller input into a ``Memory`` value (pure): validation, ids, hashes, times."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from ember.memory.errors import MemoryInputError
from ember.memory.models import Memory, NewMemory, content_hash

MAX_CONTENT = 20_000


def new_id() -> str:
    """12 hex digits of a uuid4: short in the injected ``[id]`` (every character is paid for
    on every request), and 48 bits make a clash in one project negligible (re-drawn if so)."""
    return uuid.uuid4().hex[:12]


def clean_id(v: str | None) -> str | None:
    """Blank ids are no ids: ``session_id=""`` must not make a memory session-scoped."""
    return (v.strip() or None) if isinstance(v, str) else None


def draft(item: NewMemory, memory_id: str, now: float) -> Memory:
    """Validate ``item``; ``MemoryInputError`` names the bad field and the fix."""
    content = item.content.strip() if isinstance(item.content, str) else ""
    if not content:
        raise MemoryInputError("content: must be a non-empty string")
    if len(content) > MAX_CONTENT:
        raise MemoryInputError(f"content: longer than {MAX_CONTENT} characters; split it")
    try:
        importance = float(item.importance)
    except (TypeError, ValueError):
        raise MemoryInputError(f"importance: {item.importance!r} is not a number") from None
    if not 0.0 <= importance <= 1.0:
        raise MemoryInputError(f"importance: {item.importance} is not between 0 and 1")
    if not isinstance(item.metadata, Mapping):
        raise MemoryInputError("metadata: must be a JSON object")
    created = now if item.created_at is None else float(item.created_at)
    return Memory(
        id=memory_id,
        content=content,
        created_at=created,
        valid_from=created,
        importance=importance,
        user_id=clean_id(item.user_id),
        session_id=clean_id(item.session_id),
        agent_id=clean_id(item.agent_id),
        turn_id=clean_id(item.turn_id),
        category=clean_id(item.category),
        metadata=dict(item.metadata),
        content_hash=content_hash(content),
    )

"""Turning caller input into a ``Memory`` value (pure): validation, ids, hashes, times.

Every write of every door (shadow, steward, traffic learning, MCP, tool mode, ``memory
add``/``import``, updates and supersessions) passes through ``draft``, so it is where a secret
is stopped for good: masked in the content and metadata, or the fact refused when the secret
is all it says (``SecretRefused``). A door that wants to tell its user why asks
``ember.redaction`` itself first; this is the guard that holds when a door forgets."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from ember.memory.errors import MemoryInputError, SecretRefused
from ember.memory.models import Memory, NewMemory, content_hash
from ember.redaction import mask, redact

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
    found = redact(content)
    if found.only_secret:
        raise SecretRefused(
            f"content: {found.reason()}; say what the secret is for and where it is kept, "
            "never its value"
        )
    content = found.text
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
        metadata=_masked(item.metadata),
        content_hash=content_hash(content),
    )


def _masked(value: Any) -> Any:
    """``value`` (JSON-like) with every string in it masked: metadata is stored and shown
    with the memory, so a key in it would leak as surely as one in the content."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, Mapping):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(v) for v in value]
    return value

"""The hit shape CONTRACT.md fixes for a memory search (pure).

``ember memory search --json`` and the MCP server's ``memory_search`` print the same
``{"id", "content", "score", "created_at", "metadata"}`` per hit, with ``"explain"`` added on
request. One definition, so a field renamed for one of them cannot quietly break the scripts
and agents that read the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ember.memory.models import MemoryHit, iso


def hit_json(h: MemoryHit) -> dict[str, Any]:
    m = h.memory
    return {
        "id": m.id,
        "content": m.content,
        "score": h.score,
        "created_at": iso(m.created_at),
        "metadata": dict(m.metadata),
    }


def hits_json(
    hits: Sequence[MemoryHit], explained: Sequence[dict[str, Any] | None]
) -> list[dict[str, Any]]:
    """The contract's hit shape; an explanation adds ``"explain"`` to its hit."""
    return [
        hit_json(h) | ({"explain": e} if e is not None else {})
        for h, e in zip(hits, explained, strict=True)
    ]

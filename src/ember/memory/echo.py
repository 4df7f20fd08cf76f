"""No echo: a fact is never injected into a conversation that already holds it (pure).

A fact extracted from a session (by the shadow, or learned from its traffic) is evidenced by
that session's own messages. Injected back into the same session a few turns later it is an
echo: "Recalled from earlier sessions" about something said minutes ago, paid as fresh input
and a cache write (138 uncached tokens measured with Claude Code). The same holds for another
session that carries those messages in its history (a resumed or forked conversation under a
new id).

So a memory carries where it came from (``provenance``): the session it was learned in, and the
digests of the messages its evidence names (``ember.protocols.transcript_items.item_digest``: role,
kind and text, so the same words in another session digest the same). A hit echoes when its
session is the asking one, or when the ask's conversation holds one of those messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ember.facts import EVIDENCE_DIGESTS, SESSION, provenance
from ember.memory.models import MemoryHit

__all__ = ["EVIDENCE_DIGESTS", "SESSION", "not_echoed", "provenance"]


def not_echoed(
    hits: Sequence[MemoryHit], session_id: str, context: Callable[[], set[str]]
) -> list[MemoryHit]:
    """The hits that are not already in the asking conversation. ``context`` gives the
    digests of the conversation's messages; it is called at most once, and only when a hit
    from another session names evidence messages (digesting a long history is not free)."""
    kept: list[MemoryHit] = []
    held: set[str] | None = None
    for hit in hits:
        meta = hit.memory.metadata
        if meta.get(SESSION) == session_id:
            continue
        wanted = meta.get(EVIDENCE_DIGESTS)
        if isinstance(wanted, list) and wanted:
            if held is None:
                held = context()
            if any(d in held for d in wanted):
                continue
        kept.append(hit)
    return kept

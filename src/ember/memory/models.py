"""The memory data model: one self-contained fact with a derived scope and a validity window.

A memory is not a piece of chat history; it is an extracted fact. Its *scope* is derived from
which ids are set, never stored as a separate field that could disagree with them: a row with a
``session_id`` is session-scoped whatever else it says. Validity is a window: a memory is
*current* while ``valid_until`` is unset; superseding a memory closes its window and links the
two rows (``supersedes`` / ``superseded_by``) instead of deleting history.

Times are UTC epoch seconds (floats): cheap to store, compare and index; they become ISO-8601
only at the edges (CLI, JSON, rendering).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from ember.facts import EVIDENCE_KINDS, Evidence, EvidenceKind, NewMemory

__all__ = [
    "EVIDENCE_KINDS",
    "TURN",
    "Evidence",
    "EvidenceKind",
    "Memory",
    "MemoryFilter",
    "MemoryHit",
    "NewMemory",
    "Scope",
    "content_hash",
    "derive_scope",
    "iso",
]


class Scope(StrEnum):
    """How long a memory is meant to hold, broadest first."""

    USER = "user"  # across every session of the project
    SESSION = "session"  # one task / conversation
    AGENT = "agent"  # one agent's lifetime inside a session
    TURN = "turn"  # one model call; dropped after use


def derive_scope(
    user_id: str | None, session_id: str | None, agent_id: str | None, turn_id: str | None
) -> Scope:
    """The narrowest level whose id is set (turn > agent > session), else USER.

    Deriving instead of storing a scope column means a row can never claim to be user-wide
    while carrying a session id — the inconsistency that lets one session's scratch facts
    leak into every later session.
    """
    if turn_id:
        return Scope.TURN
    if agent_id:
        return Scope.AGENT
    if session_id:
        return Scope.SESSION
    return Scope.USER


def content_hash(content: str) -> str:
    """Hash of the normalised content, used to dedup identical facts.

    Normalisation is NFC, whitespace collapsed and case folded, so "Uses  pytest" and
    "uses pytest" are one fact; punctuation is kept (it can change meaning: "v1.2" vs "v12").
    """
    norm = " ".join(unicodedata.normalize("NFC", content).split()).casefold()
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()[:32]


def iso(ts: float | None) -> str | None:
    """Epoch seconds to ISO-8601 UTC (``2026-12-01T10:00:00Z``); None stays None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Memory:
    """One stored fact. Immutable: every change produces a new value from the store."""

    id: str
    content: str
    created_at: float
    valid_from: float
    importance: float = 0.5
    user_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    turn_id: str | None = None
    category: str | None = None
    valid_until: float | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    promoted_from: str | None = None
    promotion_chain: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    access_count: int = 0
    last_accessed: float | None = None
    content_hash: str = ""

    @property
    def scope(self) -> Scope:
        return derive_scope(self.user_id, self.session_id, self.agent_id, self.turn_id)

    @property
    def is_current(self) -> bool:
        return self.valid_until is None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO-8601) for the CLI and tools."""
        return {
            "id": self.id,
            "content": self.content,
            "scope": self.scope.value,
            "importance": self.importance,
            "category": self.category,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "agent_id": self.agent_id,
            "turn_id": self.turn_id,
            "created_at": iso(self.created_at),
            "valid_from": iso(self.valid_from),
            "valid_until": iso(self.valid_until),
            "supersedes": self.supersedes,
            "superseded_by": self.superseded_by,
            "promoted_from": self.promoted_from,
            "promotion_chain": list(self.promotion_chain),
            "metadata": dict(self.metadata),
            "access_count": self.access_count,
            "last_accessed": iso(self.last_accessed),
        }


#: The category of a memory that is one turn of a conversation (``ember memory import
#: --turns``): its reply is the next turn of the same session (``search.merge``).
TURN = "turn"


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a caller may see. ``None`` in a field means "any".

    A memory is visible when each id it carries matches the filter's value for that level
    (or the filter leaves that level open). So a session filter shows that session's facts
    plus every user-wide fact, and never another session's scratch facts. TURN memories are
    visible only to a filter naming their turn.
    """

    user_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    turn_id: str | None = None

    def admits(self, m: Memory) -> bool:
        pairs = (
            (m.user_id, self.user_id),
            (m.session_id, self.session_id),
            (m.agent_id, self.agent_id),
        )
        if any(mine and wanted and mine != wanted for mine, wanted in pairs):
            return False
        return not m.turn_id or m.turn_id == self.turn_id


@dataclass(frozen=True)
class MemoryHit:
    """A memory with the numbers that ranked it.

    ``similarity`` is the cosine of query and memory, ``lexical`` the keyword part (the
    weighted share of the ask's terms the memory holds under the shipped ranking, BM25 / best
    BM25 under the others; None when no ask term occurs), ``recency`` the age factor,
    ``timing`` the closeness to the time the ask names (1 when it names none), ``substance``
    the share a short conversation turn keeps (1 for facts), ``reply_of`` the id of the turn
    whose score this reply inherited (None when it kept its own) and ``score`` the final
    ranking value: the one number that ranks and that the floor checks.
    """

    memory: Memory
    score: float
    similarity: float
    lexical: float | None
    recency: float
    timing: float = 1.0
    substance: float = 1.0
    reply_of: str | None = None

"""Per-session shaping state, in memory and bounded.

What a session needs remembered between its requests: the verbosity level in force (the
bytes of its block must not change while its cache is warm), when it was last active and how
long its cache lives, whether a clamped thinking budget is being held, and a note on each of
its last few requests (what effort went out, what came back) for signal detection and the
cache guard. It lives in the proxy's session registry (``ember.sessions``): least-recently
active sessions are forgotten past its capacity, so a proxy that runs for months does not
grow; a forgotten session that comes back is treated as new.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.sessions import SessionRegistry
from ember.shaping.signals import PreviousAnswer

DEFAULT_CAPACITY = 4096
#: Request notes kept per session: the signal and the cache guard look one request back;
#: a couple more absorb response stages that finish out of order.
NOTES_KEPT = 4


@dataclass
class RequestNote:
    """One request of a session, as sent and as answered (``answer`` once it is known)."""

    seq: int
    started_at: float
    params: tuple[str | None, str | None]
    ember_changed_params: bool
    answer: PreviousAnswer | None = None
    #: the request was answered (``ok``) with usage: its cache counters are evidence
    usage_known: bool = False
    cache_read: int = 0
    cache_write: int = 0


@dataclass
class SessionState:
    level: int
    source: str
    last_seen: float
    ttl: float
    seq: int = 0
    budget_held: bool = False
    notes: dict[int, RequestNote] = field(default_factory=dict)

    def is_cold(self, now: float) -> bool:
        """Idle past its cache TTL: whatever was cached has expired anyway."""
        return now - self.last_seen > self.ttl

    def add_note(self, note: RequestNote) -> None:
        self.notes[note.seq] = note
        for seq in [s for s in self.notes if s <= note.seq - NOTES_KEPT]:
            del self.notes[seq]


class SessionBook:
    """Shaping's view of the proxy's session registry: its ``SessionState`` per session, kept
    (and forgotten, least recently active first) with the session itself."""

    KEY = "shaping"

    def __init__(self, registry: SessionRegistry | None = None, capacity: int = DEFAULT_CAPACITY):
        self.registry = registry if registry is not None else SessionRegistry(capacity)

    def __len__(self) -> int:
        return self.registry.holding(self.KEY)

    def get(self, session_id: str) -> SessionState | None:
        """The session (marked as just active), or None."""
        state: SessionState | None = self.registry.feature(session_id, self.KEY)
        return state

    def peek(self, session_id: str) -> SessionState | None:
        """The session without touching its recency (for response-side bookkeeping)."""
        state: SessionState | None = self.registry.feature(session_id, self.KEY, touch=False)
        return state

    def put(self, session_id: str, state: SessionState) -> None:
        self.registry.put_feature(session_id, self.KEY, state)

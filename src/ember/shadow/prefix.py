"""The recorded prefix: the exact last request of each session's own thread, and its answer.

In memory only, and only while the provider's cache can still hold it: 5 minutes, or an hour
when the client marked ``ttl: "1h"``. Past that, "hot" is an illusion billed as cold input,
and the client's credentials — kept beside the prefix so the shadow call can be made as the
client's own — are dropped with it. Nothing here is ever written to disk or logged.

A prefix is the *bytes sent upstream* (after ember's own edits: the verbosity block, the
replayed memory blocks), never a rebuild: one different byte and the cache misses.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ember.protocols.base import AssembledMessage, ProtocolAdapter

#: Request headers a background call needs to speak as the client (auth, API version, betas);
#: everything else the client sent stays out of the shadow call.
CREDENTIAL_HEADERS = frozenset(
    {
        "x-api-key",
        "authorization",
        "anthropic-version",
        "anthropic-beta",
        "openai-organization",
        "openai-project",
        "openai-beta",
        "x-goog-api-key",
    }
)


@dataclass
class Prefix:
    session_id: str
    project_key: str  # the project's database path, as a string
    generation: int
    adapter: ProtocolAdapter
    path: str
    query: str
    headers: list[tuple[str, str]]  # as forwarded upstream: credentials included
    sent: bytes
    answer: AssembledMessage
    recorded_at: float
    ttl: float
    #: total input tokens of the recorded request (what a hot run reads from the cache)
    input_tokens: int = 0
    #: library mode: the resident propose tool the recorded request offers (the shadow turn
    #: answers by calling it); None: answer with a fenced json block (tools never change)
    propose_tool: str | None = None

    def fresh(self, now: float) -> bool:
        return now - self.recorded_at < self.ttl

    def credentials(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.headers if k.lower() in CREDENTIAL_HEADERS]


class PrefixBook:
    """One prefix per session (the latest), dropped past its TTL or on demand."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._prefixes: dict[str, Prefix] = {}

    def __len__(self) -> int:
        return len(self._prefixes)

    def note(self, prefix: Prefix) -> None:
        self._prefixes[prefix.session_id] = prefix

    def get(self, session_id: str) -> Prefix | None:
        """The session's prefix while it is fresh (a stale one is dropped on sight)."""
        prefix = self._prefixes.get(session_id)
        if prefix is not None and not prefix.fresh(self._clock()):
            del self._prefixes[session_id]
            return None
        return prefix

    def drop(self, session_id: str) -> None:
        self._prefixes.pop(session_id, None)

    def expire(self) -> int:
        """Drop every stale prefix (and the credentials with it); returns how many."""
        now = self._clock()
        stale = [s for s, p in self._prefixes.items() if not p.fresh(now)]
        for s in stale:
            del self._prefixes[s]
        return len(stale)

    def credentials(self, project_key: str, family: str) -> list[tuple[str, str]] | None:
        """The freshest credentials a session of the project sent to the provider ``family``
        (``ProtocolAdapter.family``: both OpenAI APIs take the same key)."""
        now = self._clock()
        best: Prefix | None = None
        for p in self._prefixes.values():
            mine = p.project_key == project_key and p.adapter.family == family
            if mine and p.fresh(now) and (best is None or p.recorded_at > best.recorded_at):
                best = p
        return best.credentials() if best is not None else None

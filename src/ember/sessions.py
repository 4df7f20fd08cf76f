"""The proxy's book of live sessions: their threads, their project, when they were last seen.

One registry per proxy, shared by every feature, so shaping, memory, accounting (and shadow
memory next) agree on what a session is. Bounded: the least recently seen sessions are
forgotten past ``capacity``; a forgotten session that comes back starts afresh, which only
costs the first request's thread guess.

A session is bound to the first project it resolves to, so a request that names no project
of its own lands in the session's database: Claude Code's title request names no working
directory, and a working directory found only in a message's text is a weaker sign than the
session's. A request that names its project itself — the explicit headers
(``x-ember-project-id``, ``x-ember-cwd``), its system prompt, the configured project root —
is served by that project even when its session was bound to another: a session id two
projects share (a harness's fixed ``x-ember-session-id`` or ``prompt_cache_key``) must not
hand the first project's memories to the second (fail closed across projects).

Features keep their per-session state here too (``feature``/``put_feature``), so it is
bounded and forgotten together, and background work can ask whether a session is ``busy``
(a request in flight) or how long it has been idle.

Runs on the event loop only: plain dictionary work, no locks, no I/O.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ember.project import ProjectRef
from ember.session import CredentialTags
from ember.threads import RequestShape, SessionThreads, Thread, classify

DEFAULT_CAPACITY = 8192


@dataclass
class SessionInfo:
    threads: SessionThreads = field(default_factory=SessionThreads)
    project: ProjectRef | None = None
    first_seen: float = 0.0
    last_seen: float = 0.0
    requests: int = 0
    #: requests of the session being answered right now (background work waits for zero)
    in_flight: int = 0
    #: each feature's own state for the session, by feature name (forgotten with the session)
    features: dict[str, Any] = field(default_factory=dict)


#: Where a request names its own project (``project.resolve_project``'s sources): such a
#: request is served by that project, whatever its session was bound to.
_NAMED_BY_REQUEST = ("header:", "system-prompt", "project-root")


class SessionRegistry:
    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
        credentials: CredentialTags | None = None,
    ) -> None:
        self.capacity = capacity
        self._clock = clock
        self._sessions: OrderedDict[str, SessionInfo] = OrderedDict()
        #: tells clients with different API keys apart (``ember.session``): the proxy's keeps
        #: its salt in the ember home (``CredentialTags.for_home``), else one per registry
        self.credentials = credentials if credentials is not None else CredentialTags()

    def __len__(self) -> int:
        return len(self._sessions)

    def observe(
        self, session_id: str, shape: RequestShape, project: ProjectRef | None
    ) -> tuple[Thread, ProjectRef | None]:
        """Record one request; returns its thread and the project it belongs to."""
        info = self._touch(session_id)
        thread, info.threads = classify(session_id, shape, info.threads)
        info.last_seen = self._clock()
        info.requests += 1
        return thread, self._bind(info, project)

    @staticmethod
    def _bind(info: SessionInfo, project: ProjectRef | None) -> ProjectRef | None:
        if project is not None and project.source.startswith(_NAMED_BY_REQUEST):
            info.project = info.project or project
            return project
        if info.project is None:
            info.project = project
        return info.project

    def project_of(self, session_id: str) -> ProjectRef | None:
        """The project a session is bound to (for a request that named none itself)."""
        info = self._sessions.get(session_id)
        return info.project if info is not None else None

    def get(self, session_id: str) -> SessionInfo | None:
        return self._sessions.get(session_id)

    def _touch(self, session_id: str) -> SessionInfo:
        info = self._sessions.get(session_id)
        if info is None:
            now = self._clock()
            info = SessionInfo(first_seen=now, last_seen=now)
            self._sessions[session_id] = info
            while len(self._sessions) > self.capacity:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(session_id)
        return info

    def feature(self, session_id: str, name: str, *, touch: bool = True) -> Any:
        """A feature's state for the session (None when it has none); ``touch`` marks the
        session as just active."""
        info = self._sessions.get(session_id)
        if info is None:
            return None
        if touch:
            self._sessions.move_to_end(session_id)
        return info.features.get(name)

    def put_feature(self, session_id: str, name: str, value: Any) -> None:
        self._touch(session_id).features[name] = value

    def holding(self, name: str) -> int:
        """How many sessions hold state for feature ``name``."""
        return sum(1 for info in self._sessions.values() if name in info.features)

    def begin(self, session_id: str) -> None:
        """A request of the session is on its way upstream."""
        self._touch(session_id).in_flight += 1

    def end(self, session_id: str) -> None:
        """That request was answered (or failed); the session is idle from now on."""
        info = self._sessions.get(session_id)
        if info is not None:
            info.in_flight = max(0, info.in_flight - 1)
            info.last_seen = self._clock()

    def busy(self, session_id: str) -> bool:
        info = self._sessions.get(session_id)
        return info is not None and info.in_flight > 0

    def idle_for(self, session_id: str) -> float | None:
        """Seconds since the session's last request ended (None: unknown or busy)."""
        info = self._sessions.get(session_id)
        if info is None or info.in_flight:
            return None
        return self._clock() - info.last_seen

    def age(self, session_id: str) -> float | None:
        """Seconds since the session's first request (None: not seen, or forgotten)."""
        info = self._sessions.get(session_id)
        return None if info is None else self._clock() - info.first_seen

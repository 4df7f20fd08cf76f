"""What a feature hands to memory: a fact to keep, why it is believed, and where to keep it.

The kernel's side of memory, below every feature. Shadow memory and traffic learning find
facts; memory stores and finds them. They meet here, so neither imports the other: a feature
builds ``NewMemory`` values with their ``Evidence`` and ``provenance``, and stores them through
the ``FactStore`` that ``MemoryOpener`` hands out for a project (the memory router's, in the
proxy). ``ember.memory.models`` re-exports the values for the store's own callers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ember.project import ProjectRef
from ember.services import ServiceKey

EvidenceKind = Literal["user-stated", "user-accepted", "tool-verified", "observed-outcome"]
EVIDENCE_KINDS: tuple[EvidenceKind, ...] = (
    "user-stated",
    "user-accepted",
    "tool-verified",
    "observed-outcome",
)


@dataclass(frozen=True)
class Evidence:
    """Why a memory is believed: points at exactly one transcript message or one session."""

    kind: EvidenceKind
    message_id: str | None = None
    session_id: str | None = None

    def __post_init__(self) -> None:
        if (self.message_id is None) == (self.session_id is None):
            raise ValueError("evidence points at exactly one of message_id or session_id")
        if self.kind not in EVIDENCE_KINDS:
            raise ValueError(f"evidence kind must be one of {', '.join(EVIDENCE_KINDS)}")


@dataclass(frozen=True)
class NewMemory:
    """What a caller supplies to create a memory; the store fills id, times and hashes."""

    content: str
    importance: float = 0.5
    user_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    turn_id: str | None = None
    category: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: float | None = None
    evidence: tuple[Evidence, ...] = ()
    #: the ids of current memories this fact corrects: stored with it, they end (kept as
    #: history, pointing at it), so the stale version is never injected beside the new one;
    #: an id that names no current memory of the project is passed over
    supersedes: tuple[str, ...] = ()


#: The metadata keys a memory's provenance is kept under (``ember.memory.echo`` reads them).
SESSION = "session"
EVIDENCE_DIGESTS = "evidence_digests"


def provenance(metadata: Mapping[str, Any], digests: Iterable[str]) -> dict[str, Any]:
    """``metadata`` with the digests of the memory's evidence messages (sorted, once each)."""
    out = dict(metadata)
    found = sorted(set(digests))
    if found:
        out[EVIDENCE_DIGESTS] = found
    return out


class StoredFact(Protocol):
    """A fact as the store returns it (``ember.memory.models.Memory``), as far as a feature
    reads it."""

    @property
    def id(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def created_at(self) -> float: ...
    @property
    def category(self) -> str | None: ...
    @property
    def metadata(self) -> Mapping[str, Any]: ...


class FactStore(Protocol):
    """One project's memory, as a feature that finds facts uses it (blocking: call it from a
    worker thread)."""

    def add_many(
        self, items: Sequence[NewMemory], *, dedup: bool = True, background: bool = False
    ) -> Sequence[StoredFact]: ...

    def list(self) -> Sequence[StoredFact]: ...

    def delete(self, memory_id: str) -> object: ...

    def current(self, ids: Sequence[str]) -> Sequence[StoredFact]:
        """The current version of each memory named (a superseded one's successor, once
        each, in order); ids that name nothing current are passed over."""
        ...

    def recalled(self, session_id: str) -> Sequence[StoredFact]:
        """The current versions of the memories injected into the session's asks."""
        ...


class MemoryOpener(Protocol):
    """A project's fact store (opened if needed: blocking), or None when it has none
    (unresolved): what the memory feature provides as ``MEMORIES`` (its router's
    ``for_project``)."""

    def __call__(self, project: ProjectRef, /) -> FactStore | None: ...


#: The project stores that facts found by shadow memory and traffic learning are saved into,
#: the very ones the memory stage reads: provided by memory, needed by them.
MEMORIES: ServiceKey[MemoryOpener] = ServiceKey("memories")

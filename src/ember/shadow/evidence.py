"""The service's evidence checks: the model's say-so is not evidence (pure).

Second of three layers (the schema before it, SQLite triggers after it): every pointer must
name a message ember recorded, in this session, of the kind the evidence claims —
- ``user-stated`` and ``user-accepted``: a message the user wrote;
- ``tool-verified``: a successful tool result;
- ``observed-outcome``: a successful tool result, or this session as a whole.
A pointer into another session is never a fact: one session's shadow cannot see another's, so
such a pointer is a hallucination or a mix-up. The failure is kept on the proposal
(``validation_error``); its valid siblings are kept too.
"""

from __future__ import annotations

from collections.abc import Mapping

from ember.facts import Evidence
from ember.shadow.models import FactIn
from ember.store.transcript_rows import Message

TARGETS: dict[str, frozenset[str]] = {
    "user-stated": frozenset({"user"}),
    "user-accepted": frozenset({"user"}),
    "tool-verified": frozenset({"tool_result"}),
    "observed-outcome": frozenset({"tool_result"}),
}


def check(fact: FactIn, session_id: str, found: Mapping[str, Message]) -> str | None:
    """None when every pointer holds, else what is wrong with the first one that does not."""
    for ev in fact.evidence:
        if ev.sessionId is not None:
            if ev.sessionId != session_id:
                return f"evidence points at another session ({ev.sessionId})"
            continue
        assert ev.messageId is not None
        m = found.get(ev.messageId)
        if m is None:
            return f"evidence {ev.messageId} is not a message of this project's transcript"
        if m.session_id != session_id:
            return f"evidence {ev.messageId} belongs to another session"
        wanted = TARGETS[ev.kind]
        if m.kind not in wanted:
            return (
                f"{ev.kind} evidence must point at a {' or '.join(sorted(wanted))} message; "
                f"{ev.messageId} is {m.kind}"
            )
    return None


def as_memory_evidence(fact: FactIn) -> list[Evidence]:
    """The evidence of a checked fact, as the memory store keeps it."""
    return [Evidence(e.kind, message_id=e.messageId, session_id=e.sessionId) for e in fact.evidence]

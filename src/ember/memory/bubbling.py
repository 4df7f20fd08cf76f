"""Bubbling: an important narrow-scope fact is copied up to the user scope (pure policy).

A fact learnt in one session ("the staging DB is read-only") is often true for every later
session; left in session scope it would be invisible to them. Important facts
(importance >= 0.7) are therefore *copied* to the user scope: the original stays where it was
learnt (its session still owns it), the copy records ``promoted_from`` and the
``promotion_chain``, so "why is this user-wide?" always has an answer. A copy is never
bubbled again and user-scope facts do not bubble, so promotion cannot loop.
"""

from __future__ import annotations

import dataclasses

from ember.memory.models import Memory, Scope

BUBBLE_THRESHOLD = 0.7


def should_bubble(m: Memory, threshold: float = BUBBLE_THRESHOLD) -> bool:
    return (
        m.importance >= threshold
        and m.scope is not Scope.USER
        and m.promoted_from is None
        and m.is_current
    )


def promoted_copy(m: Memory, new_id: str) -> Memory:
    """The user-scope copy of ``m``: same fact, session/agent/turn ids cleared."""
    return dataclasses.replace(
        m,
        id=new_id,
        session_id=None,
        agent_id=None,
        turn_id=None,
        supersedes=None,
        superseded_by=None,
        promoted_from=m.id,
        promotion_chain=(*m.promotion_chain, m.id),
        access_count=0,
        last_accessed=None,
    )

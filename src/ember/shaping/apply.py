"""Carrying shaping decisions onto a request, through the protocol adapters.

The only shaping code that edits a body. It never decides anything (``policy`` and the stage
do) and never touches bytes itself: each edit is an adapter call that splices into the
client's original JSON, so every byte outside the value it targets is forwarded as sent.
"""

from __future__ import annotations

from ember.protocols.base import ProtocolAdapter
from ember.protocols.jsonedit import JsonDoc
from ember.shaping.policy import EffortPlan
from ember.shaping.verbosity import CLOSE_TAG, OPEN_TAG, steering_text


def apply_verbosity(
    adapter: ProtocolAdapter, doc: JsonDoc, level: int, *, inherits_system: bool = True
) -> bool:
    """Put the level's block at the tail of the system prompt (replacing ember's block if the
    body already has one); True when the body changed. Level 0 leaves the body alone."""
    block = steering_text(level)
    if block is None:
        return False
    return adapter.put_system_block(
        doc, OPEN_TAG, CLOSE_TAG, block, inherits_system=inherits_system
    )


def apply_effort(adapter: ProtocolAdapter, doc: JsonDoc, plan: EffortPlan) -> tuple[str, ...]:
    """Apply ``plan``; returns the names of the fields that changed (``effort``,
    ``thinking_budget``, ``verbosity``). The adapters refuse to create an effort field or
    a budget, whatever the plan says."""
    changed: list[str] = []
    if plan.effort is not None and adapter.set_effort(doc, plan.effort):
        changed.append("effort")
    if plan.thinking_budget is not None and adapter.set_thinking_budget(doc, plan.thinking_budget):
        changed.append("thinking_budget")
    if plan.verbosity is not None and adapter.set_verbosity(doc, plan.verbosity):
        changed.append("verbosity")
    return tuple(changed)

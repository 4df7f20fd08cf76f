"""Carrying shaping decisions onto a request, through the wire edits (``protocols.edits``).

The only shaping code that edits a body. It never decides anything (``policy`` and the stage
do) and never touches bytes itself: each edit splices into the client's original JSON, so
every byte outside the value it targets is forwarded as sent.
"""

from __future__ import annotations

from ember.protocols import edits
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
    return edits.put_system_block(
        adapter, doc, OPEN_TAG, CLOSE_TAG, block, inherits_system=inherits_system
    )


def apply_effort(adapter: ProtocolAdapter, doc: JsonDoc, plan: EffortPlan) -> tuple[str, ...]:
    """Apply ``plan``; returns the names of the fields that changed (``effort``,
    ``thinking_budget``, ``verbosity``). The adapters give no place to create an effort field
    or a budget, whatever the plan says."""
    changed: list[str] = []
    if plan.effort is not None and edits.set_effort(adapter, doc, plan.effort):
        changed.append("effort")
    budget = plan.thinking_budget
    if budget is not None and edits.set_thinking_budget(adapter, doc, budget):
        changed.append("thinking_budget")
    if plan.verbosity is not None and edits.set_verbosity(adapter, doc, plan.verbosity):
        changed.append("verbosity")
    return tuple(changed)

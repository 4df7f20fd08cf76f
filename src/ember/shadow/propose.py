"""The resident ``memory_propose`` tool of library mode, and the policy that guards it (pure).

A framework that runs the model itself offers ``memory_propose`` in its tool list on every
turn, from the first one. The shadow turn then answers by calling it — and the tools stay
byte-identical to the recorded prefix, which is what keeps the shadow turn a cache read
(adding the tool for the shadow turn only would change the first segment of the prompt and
re-bill all of it as a cache write).

Offering a tool on every turn means the model can call it on any turn, so the framework asks
``tool_call_refusal`` before it runs a call: the two rules are symmetrical —
- outside a shadow turn ``memory_propose`` is refused (the model's claims are no memory: only a
  shadow turn's proposals are checked against the transcript), with a result saying so;
- inside a shadow turn every other tool is refused (a shadow turn proposes, it never acts).
The refusal is returned as a tool result of the request's own wire format
(``refusal_result``), so the conversation stays valid and the model reads why.

The definition's bytes are fixed: the same dict for a wire format every time (its JSON spells
the same way turn after turn, so the tools segment of the prompt never changes).
"""

from __future__ import annotations

import copy
from typing import Any, get_args

from ember.protocols.base import Block
from ember.protocols.tooling import TOOLING, ToolingOps, ToolOutcome, ToolSpec
from ember.shadow.models import MAX_FACT_CHARS, MAX_FACTS, MAX_SUPERSEDES, EvidenceKind

MEMORY_PROPOSE = "memory_propose"
WIRE_FORMATS = ("anthropic", "openai_chat", "openai_responses")

_DESCRIPTION = (
    "Propose durable facts about this project worth remembering in later sessions, each with "
    "evidence pointing at the messages that show it. Only available in ember's shadow turns "
    "(a turn that asks for it explicitly); outside one the call is refused and does nothing."
)

_EVIDENCE = {
    "type": "object",
    "description": (
        "Exactly one of messageId (an m:<id> listed in the shadow turn) or sessionId (only "
        "for observed-outcome: what the whole session demonstrably did)."
    ),
    "properties": {
        "kind": {"type": "string", "enum": list(get_args(EvidenceKind))},
        "messageId": {"type": "string", "minLength": 1, "maxLength": 64},
        "sessionId": {"type": "string", "minLength": 1, "maxLength": 256},
    },
    "required": ["kind"],
    "additionalProperties": False,
}

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "maxItems": MAX_FACTS,
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "minLength": 1, "maxLength": MAX_FACT_CHARS},
                    "category": {"type": "string", "maxLength": 64},
                    "evidence": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 10,
                        "items": _EVIDENCE,
                    },
                    "supersedes": {
                        "type": "array",
                        "description": (
                            "Ids of remembered facts (as the shadow turn lists them) that this "
                            "fact corrects or replaces."
                        ),
                        "maxItems": MAX_SUPERSEDES,
                        "items": {"type": "string", "minLength": 1, "maxLength": 64},
                    },
                },
                "required": ["content", "evidence"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}

#: Not strict: ``category`` and the two evidence targets are optional (Responses defaults
#: function tools to strict mode, which wants every property required).
SPEC = ToolSpec(MEMORY_PROPOSE, _DESCRIPTION, INPUT_SCHEMA, strict=False)

OUTSIDE_SHADOW = (
    "memory_propose is refused: it is only available in ember's shadow turns, which ask for it "
    "explicitly. Nothing was saved. Carry on with the user's task; facts worth keeping are "
    "picked up from the conversation later."
)
INSIDE_SHADOW = (
    "{name} is refused: a shadow turn only proposes facts with memory_propose and runs no "
    "other tool. Nothing was run."
)


def memory_propose_tool(protocol: str) -> dict[str, Any]:
    """The tool's definition in ``protocol``'s wire format (``anthropic``, ``openai_chat``,
    ``openai_responses``): keep it in the tool list of every turn. A fresh copy each call
    (a caller that edits it cannot change the next one)."""
    return copy.deepcopy(_ops(protocol).definition(SPEC))


def _ops(protocol: str) -> ToolingOps:
    """The tooling of one of the wire formats library mode speaks."""
    ops = TOOLING.get(protocol) if protocol in WIRE_FORMATS else None
    if ops is None:
        raise ValueError(f"unknown wire format {protocol!r}: use one of {', '.join(WIRE_FORMATS)}")
    return ops


def tool_call_refusal(name: str, *, shadow_turn: bool) -> str | None:
    """Why the call of tool ``name`` must not run (None: run it). Outside a shadow turn
    ``memory_propose`` is refused; inside one, everything but ``memory_propose`` is."""
    if name == MEMORY_PROPOSE:
        return None if shadow_turn else OUTSIDE_SHADOW
    return INSIDE_SHADOW.format(name=name) if shadow_turn else None


def refusal_result(protocol: str, call_id: str, text: str) -> dict[str, Any]:
    """The tool result that answers a refused call, in ``protocol``'s wire format: an
    Anthropic ``tool_result`` content block (``is_error``; it goes in the next user message),
    a Chat ``tool`` message, or a Responses ``function_call_output`` item."""
    call = Block("tool_use", id=call_id)
    return _ops(protocol).result(ToolOutcome(call, text, is_error=True))


def guard_tool_call(
    protocol: str, name: str, call_id: str, *, shadow_turn: bool = False
) -> dict[str, Any] | None:
    """For a framework's tool loop: None when the call may run, else the explanatory tool
    result to send back in its place (the call itself is not run)."""
    reason = tool_call_refusal(name, shadow_turn=shadow_turn)
    return None if reason is None else refusal_result(protocol, call_id, reason)

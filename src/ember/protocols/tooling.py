"""Tools that ember offers the model and executes itself (wire-format side).

A proxy-owned tool (``memory_search``...) is offered by appending its definition to the
request's ``tools``; when the model calls it, ember runs it and continues the conversation
upstream with the result, so the client never sees the call. This module knows how each wire
format spells a tool definition, a tool call continuation and "no more tools".

Invariants:
- Definitions are appended after the client's own tools, in a fixed order with fixed bytes,
  on every request of a session: a tools array that changes between turns invalidates the
  whole cache (tools come first in the prefix).
- A continuation replays the assistant turn as the provider produced it (thinking blocks with
  their signatures untouched: a modified thinking block is refused with a 400), minus calls to
  tools the client owns — those are dropped so the model asks for them again after it has
  read ember's results, instead of the client receiving half of a turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ember.protocols import gemini_parts
from ember.protocols.base import AssembledMessage, Block
from ember.protocols.jsonedit import JsonDoc, dumps
from ember.protocols.replay import REPLAYS


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    #: False: the model may leave out optional properties. Said only where the wire format
    #: defaults function tools to strict mode (Responses), which wants every property
    #: required; elsewhere the definition's bytes stay those of a spec without it.
    strict: bool | None = None


@dataclass(frozen=True)
class ToolOutcome:
    call: Block
    content: str
    is_error: bool = False


class ToolingOps(Protocol):
    def definition(self, spec: ToolSpec) -> dict[str, Any]: ...

    def tool_names(self, body: Any) -> set[str]: ...

    def add_definitions(self, doc: JsonDoc, specs: Sequence[ToolSpec]) -> None: ...

    def result(self, outcome: ToolOutcome) -> dict[str, Any]:
        """What answers one call in the next request: an Anthropic ``tool_result`` block (it
        goes in a user message), a Chat ``tool`` message, a Responses
        ``function_call_output`` item, a Gemini ``functionResponse`` part."""
        ...

    def continue_with(
        self, doc: JsonDoc, answer: AssembledMessage, owned: set[str], results: list[ToolOutcome]
    ) -> None: ...

    def forbid_tools(self, doc: JsonDoc) -> None: ...


def _append_tools(doc: JsonDoc, defs: list[dict[str, Any]]) -> None:
    tools = doc.value.get("tools")
    if isinstance(tools, list):
        for d in defs:
            doc.append(["tools"], d)
    else:
        doc.set_key([], "tools", defs)


def _names(body: Any, key: str) -> set[str]:
    tools = body.get("tools") if isinstance(body, dict) else None
    out: set[str] = set()
    for t in tools if isinstance(tools, list) else []:
        if isinstance(t, dict):
            fn = t.get("function")
            name = fn.get("name") if isinstance(fn, dict) else t.get(key)
            if isinstance(name, str):
                out.add(name)
    return out


def _kept(answer: AssembledMessage, owned: set[str]) -> list[Block]:
    return [b for b in answer.blocks if b.type != "tool_use" or b.name in owned]


class _Tooling:
    """Definitions are appended after the client's tools, in the given order."""

    def definition(self, spec: ToolSpec) -> dict[str, Any]:
        raise NotImplementedError

    def forbid_tools(self, doc: JsonDoc) -> None:
        """Both OpenAI formats spell it ``tool_choice: "none"``; Anthropic overrides."""
        doc.set_key([], "tool_choice", "none")

    def tool_names(self, body: Any) -> set[str]:
        return _names(body, "name")

    def add_definitions(self, doc: JsonDoc, specs: Sequence[ToolSpec]) -> None:
        _append_tools(doc, [self.definition(s) for s in specs])


class AnthropicTooling(_Tooling):
    def definition(self, spec: ToolSpec) -> dict[str, Any]:
        return {
            "name": spec.name,
            "description": spec.description,
            "input_schema": spec.input_schema,
        }

    def continue_with(
        self, doc: JsonDoc, answer: AssembledMessage, owned: set[str], results: list[ToolOutcome]
    ) -> None:
        content = [_anthropic_block(b) for b in _kept(answer, owned)]
        doc.append(["messages"], {"role": "assistant", "content": content})
        doc.append(
            ["messages"],
            {
                "role": "user",
                "content": [self.result(r) for r in results],
            },
        )

    def result(self, outcome: ToolOutcome) -> dict[str, Any]:
        return {
            "type": "tool_result",
            "tool_use_id": outcome.call.id,
            "content": outcome.content,
            **({"is_error": True} if outcome.is_error else {}),
        }

    def forbid_tools(self, doc: JsonDoc) -> None:
        doc.set_key([], "tool_choice", {"type": "none"})


def _anthropic_block(b: Block) -> dict[str, Any]:
    if b.type == "thinking":
        return {"type": "thinking", "thinking": b.text, "signature": b.signature or ""}
    if b.type == "redacted_thinking":
        return {"type": "redacted_thinking", "data": b.data or ""}
    if b.type == "tool_use":
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input or {}}
    return {"type": "text", "text": b.text}


def _arguments(b: Block) -> str:
    return b.input if isinstance(b.input, str) else dumps(b.input if b.input is not None else {})


class ChatTooling(_Tooling):
    def definition(self, spec: ToolSpec) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.input_schema,
            },
        }

    def continue_with(
        self, doc: JsonDoc, answer: AssembledMessage, owned: set[str], results: list[ToolOutcome]
    ) -> None:
        kept = _kept(answer, owned)
        text = "".join(b.text for b in kept if b.type == "text")
        calls = [
            {
                "id": b.id,
                "type": "function",
                "function": {"name": b.name, "arguments": _arguments(b)},
            }
            for b in kept
            if b.type == "tool_use"
        ]
        doc.append(
            ["messages"], {"role": "assistant", "content": text or None, "tool_calls": calls}
        )
        for r in results:
            doc.append(["messages"], self.result(r))

    def result(self, outcome: ToolOutcome) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": outcome.call.id, "content": outcome.content}


class ResponsesTooling(_Tooling):
    def definition(self, spec: ToolSpec) -> dict[str, Any]:
        definition: dict[str, Any] = {
            "type": "function",
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.input_schema,
        }
        if spec.strict is not None:
            definition["strict"] = spec.strict
        return definition

    def continue_with(
        self, doc: JsonDoc, answer: AssembledMessage, owned: set[str], results: list[ToolOutcome]
    ) -> None:
        items: list[dict[str, Any]] = []
        for b in _kept(answer, owned):
            if b.type == "text" and b.text:
                items.append(
                    {"role": "assistant", "content": [{"type": "output_text", "text": b.text}]}
                )
            elif b.type == "tool_use":
                items.append(
                    {
                        "type": "function_call",
                        "call_id": b.id,
                        "name": b.name,
                        "arguments": _arguments(b),
                    }
                )
        items += [self.result(r) for r in results]
        current = doc.value.get("input")
        if isinstance(current, list):
            for item in items:
                doc.append(["input"], item)
        else:
            first = {
                "role": "user",
                "content": [{"type": "input_text", "text": str(current or "")}],
            }
            doc.replace(["input"], [first, *items])

    def result(self, outcome: ToolOutcome) -> dict[str, Any]:
        return {
            "type": "function_call_output",
            "call_id": outcome.call.id,
            "output": outcome.content,
        }


class GeminiTooling(_Tooling):
    """Gemini declares functions inside tool objects (``{"functionDeclarations": [...]}``):
    ember's go in one tool object of their own, after the client's. Their schemas are JSON
    Schema, so they go in ``parametersJsonSchema`` (``parameters`` takes only Google's OpenAPI
    subset, and refuses keys such as ``additionalProperties``)."""

    def definition(self, spec: ToolSpec) -> dict[str, Any]:
        return {
            "name": spec.name,
            "description": spec.description,
            "parametersJsonSchema": spec.input_schema,
        }

    def add_definitions(self, doc: JsonDoc, specs: Sequence[ToolSpec]) -> None:
        _append_tools(doc, [{"functionDeclarations": [self.definition(s) for s in specs]}])

    def tool_names(self, body: Any) -> set[str]:
        tools = body.get("tools") if isinstance(body, dict) else None
        out: set[str] = set()
        for tool in tools if isinstance(tools, list) else []:
            declared = gemini_parts.field(tool, "functionDeclarations", "function_declarations")
            for d in declared if isinstance(declared, list) else []:
                if isinstance(d, dict) and isinstance(d.get("name"), str):
                    out.add(d["name"])
        return out

    def continue_with(
        self, doc: JsonDoc, answer: AssembledMessage, owned: set[str], results: list[ToolOutcome]
    ) -> None:
        """The model's turn as it gave it (signatures kept), minus the client's calls, then a
        user content answering each of ember's calls by name (and ``id``, when it had one)."""
        turn = REPLAYS["gemini"].turn(replace(answer, blocks=_kept(answer, owned)))
        doc.append(["contents"], turn[0])
        doc.append(["contents"], {"role": "user", "parts": [self.result(r) for r in results]})

    def result(self, outcome: ToolOutcome) -> dict[str, Any]:
        """By the call's name (and ``id``, when it had one)."""
        key = "error" if outcome.is_error else "output"
        call = outcome.call
        response: dict[str, Any] = {"name": call.name, "response": {key: outcome.content}}
        if call.id:
            response["id"] = call.id
        return {"functionResponse": response}

    def forbid_tools(self, doc: JsonDoc) -> None:
        """``toolConfig.functionCallingConfig.mode: NONE``, the rest of ``toolConfig`` kept."""
        body = doc.value
        key = gemini_parts.field_key(body, "toolConfig", "tool_config")
        config = body.get(key)
        if not isinstance(config, dict):
            doc.set_key([], key, {"functionCallingConfig": {"mode": "NONE"}})
            return
        inner = gemini_parts.field_key(config, "functionCallingConfig", "function_calling_config")
        if isinstance(config.get(inner), dict):
            doc.set_key([key, inner], "mode", "NONE")
        else:
            doc.set_key([key], inner, {"mode": "NONE"})


TOOLING: dict[str, ToolingOps] = {
    "anthropic": AnthropicTooling(),
    "openai_chat": ChatTooling(),
    "openai_responses": ResponsesTooling(),
    "gemini": GeminiTooling(),
}


def parse_arguments(raw: Any) -> Any:
    """Tool input as an object; OpenAI sends arguments as a JSON string."""
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            return raw
    return raw

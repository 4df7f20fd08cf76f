"""OpenAI Responses (``POST /v1/responses``).

Request: ``instructions`` (the system prompt) and ``input`` (a string, or a list of items:
role messages, ``function_call``, ``function_call_output``, ``reasoning``...). Streams are typed
events with a ``sequence_number``; ``response.completed`` carries the whole final response.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from ember.protocols.base import (
    AssembledMessage,
    Block,
    EffortFields,
    PartKind,
    ToolResult,
    Usage,
    as_str,
    find_region,
    part_kinds,
    replace_region,
    structured_error,
    text_of,
)
from ember.protocols.jsonedit import JsonDoc, dumps
from ember.protocols.openai_chat import OpenAIAdapterBase, openai_usage

_TEXT_PARTS = ("input_text", "output_text", "text")
_SYSTEM_ROLES = ("system", "developer")
_FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
_PART_KINDS: dict[str, PartKind] = {
    "input_text": "text",
    "text": "text",
    "input_image": "image",
    "input_file": "document",
}


def _items(body: Any) -> list[Any]:
    items = body.get("input") if isinstance(body, dict) else None
    return items if isinstance(items, list) else []


def _is_role(item: Any, roles: tuple[str, ...]) -> bool:
    return (
        isinstance(item, dict)
        and item.get("role") in roles
        and item.get("type", "message") == "message"
    )


class OpenAIResponsesAdapter(OpenAIAdapterBase):
    name: ClassVar[str] = "openai_responses"

    def system_text(self, body: Any) -> str:
        if not isinstance(body, dict):
            return ""
        parts = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
        parts += [
            text_of(i.get("content"), _TEXT_PARTS)
            for i in _items(body)
            if _is_role(i, _SYSTEM_ROLES)
        ]
        return "\n".join(parts)

    def message_count(self, body: Any) -> int:
        if isinstance(body, dict) and isinstance(body.get("input"), str):
            return 1
        return len(_items(body))

    def latest_user_index(self, body: Any) -> int | None:
        if isinstance(body, dict) and isinstance(body.get("input"), str):
            return 0
        items = _items(body)
        for i in range(len(items) - 1, -1, -1):
            if _is_role(items[i], ("user",)):
                return i
        return None

    def user_text(self, body: Any, index: int) -> str:
        if isinstance(body, dict) and isinstance(body.get("input"), str):
            return str(body["input"]) if index == 0 else ""
        items = _items(body)
        item = items[index] if 0 <= index < len(items) else None
        return text_of(item.get("content"), _TEXT_PARTS) if isinstance(item, dict) else ""

    def first_user_text(self, body: Any) -> str | None:
        if isinstance(body, dict) and isinstance(body.get("input"), str):
            return str(body["input"])
        for i in _items(body):
            if _is_role(i, ("user",)):
                return text_of(i.get("content"), _TEXT_PARTS)
        return None

    def tool_results(self, body: Any) -> list[ToolResult]:
        """The ``function_call_output`` items at the end of the input."""
        out: list[ToolResult] = []
        for item in reversed(_items(body)):
            if not isinstance(item, dict) or item.get("type") != "function_call_output":
                break
            output = item.get("output")
            text = output if isinstance(output, str) else text_of(output, _TEXT_PARTS)
            out.append(ToolResult(item.get("call_id"), text))
        return out[::-1]

    def recent_context(self, body: Any, before: int) -> tuple[list[str], list[str]]:
        tools: list[str] = []
        turns: list[str] = []
        for item in _items(body)[:before]:
            if _is_role(item, ("assistant",)):
                turns.append(text_of(item.get("content"), _TEXT_PARTS))
            elif isinstance(item, dict) and item.get("type") == "function_call_output":
                output = item.get("output")
                tools.append(output if isinstance(output, str) else text_of(output, _TEXT_PARTS))
        return tools, turns

    def append_system_tail(self, doc: JsonDoc, text: str) -> None:
        """Append to ``instructions`` (created when absent: it precedes the input, and a
        request without instructions has no system prefix to protect)."""
        current = doc.value.get("instructions")
        if isinstance(current, str) and current:
            doc.replace(["instructions"], current + "\n\n" + text)
        elif current is None:
            doc.set_key([], "instructions", text)
        else:
            doc.replace(["instructions"], text)

    def append_user_tail(self, doc: JsonDoc, index: int, text: str) -> None:
        part = {"type": "input_text", "text": text}
        if isinstance(doc.value.get("input"), str):
            original = {"type": "input_text", "text": doc.value["input"]}
            doc.replace(["input"], [{"role": "user", "content": [original, part]}])
            return
        content = doc.value["input"][index].get("content")
        if isinstance(content, list):
            doc.append(["input", index, "content"], part)
        else:
            original = {"type": "input_text", "text": content if isinstance(content, str) else ""}
            doc.replace(["input", index, "content"], [original, part])

    def usage(self, raw: Any) -> Usage:
        return openai_usage(raw, "input_tokens", "output_tokens", "input_tokens_details")

    def parse_response(self, body: Any) -> AssembledMessage:
        msg = AssembledMessage(protocol=self.name, complete=True)
        if not isinstance(body, dict) or body.get("error"):
            msg.error = dumps(body.get("error")) if isinstance(body, dict) else "not an object"
            if not isinstance(body, dict) or body.get("object") != "response":
                return msg
        msg.id, msg.model = as_str(body.get("id")), as_str(body.get("model"))
        msg.stop_reason = body.get("status")
        msg.usage = self.usage(body.get("usage")) if body.get("usage") else None
        for item in body.get("output") or []:
            block = _block_from_item(item)
            if block is not None:
                msg.blocks.append(block)
        return msg

    def assembler(self) -> ResponsesAssembler:
        return ResponsesAssembler()

    # -- output shaping (issue #3) ------------------------------------------------------------

    def turn_parts(self, body: Any) -> tuple[PartKind, ...]:
        """The trailing tool-output items (``function_call_output``, ``custom_tool_call_output``
        and the other ``*_call_output`` types; an error only by structured fields, as Responses
        has no ``is_error``), or the parts of a final user message, else ``()``."""
        if isinstance(body, dict) and isinstance(body.get("input"), str):
            return ("text",)
        items = _items(body)
        last = items[-1] if items else None
        if _is_output(last):
            return _output_parts(items)
        if not _is_role(last, ("user",)):
            return ()
        assert isinstance(last, dict)
        return part_kinds(last.get("content"), _PART_KINDS)

    def effort_fields(self, body: Any) -> EffortFields:
        if not isinstance(body, dict):
            return EffortFields()
        reasoning, text = body.get("reasoning"), body.get("text")
        effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
        verbosity = text.get("verbosity") if isinstance(text, dict) else None
        return EffortFields(
            effort=effort if isinstance(effort, str) else None,
            verbosity=verbosity if isinstance(verbosity, str) else None,
            verbosity_creatable=text is None or isinstance(text, dict),
        )

    def set_effort(self, doc: JsonDoc, value: str) -> bool:
        """Replace ``reasoning.effort`` when the client sent it; never create it."""
        if self.effort_fields(doc.value).effort is None:
            return False
        doc.replace(["reasoning", "effort"], value)
        return True

    def set_thinking_budget(self, doc: JsonDoc, tokens: int) -> bool:
        return False

    def set_verbosity(self, doc: JsonDoc, value: str) -> bool:
        """Set ``text.verbosity``, creating ``text`` when absent; other ``text`` keys
        (``format``) keep their bytes."""
        text = doc.value.get("text")
        if text is None:
            doc.set_key([], "text", {"verbosity": value})
            return True
        if not isinstance(text, dict):
            return False
        doc.set_key(["text"], "verbosity", value)
        return True

    def owned_system_block(self, body: Any, open_tag: str, close_tag: str) -> str | None:
        text = body.get("instructions") if isinstance(body, dict) else None
        if not isinstance(text, str):
            return None
        span = find_region(text, open_tag, close_tag)
        return None if span is None else text[span[0] : span[1]]

    def put_system_block(self, doc: JsonDoc, open_tag: str, close_tag: str, block: str) -> bool:
        """Put ember's block at the end of ``instructions`` (after a blank line), or replace
        ember's region there; ``instructions`` is created when absent. Instructions of another
        shape are left alone rather than overwritten."""
        current = doc.value.get("instructions")
        if current is None:
            doc.set_key([], "instructions", block)
            return True
        if not isinstance(current, str):
            return False
        return replace_region(doc, ["instructions"], current, open_tag, close_tag, block)


def _is_output(item: Any) -> bool:
    kind = item.get("type") if isinstance(item, dict) else None
    return isinstance(kind, str) and kind.endswith("_call_output")


def _output_parts(items: list[Any]) -> tuple[PartKind, ...]:
    parts: list[PartKind] = []
    for item in reversed(items):
        if not _is_output(item):
            break
        output = item.get("output")
        if isinstance(output, list):
            output = text_of(output, _TEXT_PARTS)
        parts.append("tool_error" if structured_error(output) else "tool_result")
    return tuple(reversed(parts))


def _block_from_item(item: Any) -> Block | None:
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind == "message":
        return Block("text", text=text_of(item.get("content"), _TEXT_PARTS))
    if kind == "function_call":
        raw = item.get("arguments", "")
        try:
            args: Any = json.loads(raw) if raw else {}
        except (json.JSONDecodeError, TypeError):
            args = raw
        return Block("tool_use", id=item.get("call_id"), name=item.get("name"), input=args)
    if kind == "reasoning":
        summary = text_of(item.get("summary"), ("summary_text",))
        return Block("thinking", text=summary, signature=item.get("encrypted_content"))
    return None


class ResponsesAssembler:
    """Takes the final response from ``response.completed``; when the stream is cut before
    it, what was streamed so far (text deltas, finished items) is kept."""

    def __init__(self) -> None:
        self.msg = AssembledMessage(protocol=OpenAIResponsesAdapter.name)
        self._text: list[str] = []
        self._items: list[Block] = []
        self._final: AssembledMessage | None = None

    def feed(self, event: str | None, data: str) -> None:
        try:
            p = json.loads(data)
        except json.JSONDecodeError:
            return
        if not isinstance(p, dict):
            return
        kind = p.get("type", event)
        if kind in _FINAL_EVENTS and isinstance(p.get("response"), dict):
            self._final = OpenAIResponsesAdapter().parse_response(p["response"])
        elif kind == "response.created" and isinstance(p.get("response"), dict):
            response = p["response"]
            self.msg.id, self.msg.model = as_str(response.get("id")), as_str(response.get("model"))
        elif kind == "response.output_text.delta":
            self._text.append(str(p.get("delta", "")))
        elif kind == "response.output_item.done":
            block = _block_from_item(p.get("item"))
            if block is not None:
                self._items.append(block)
        elif kind == "error":
            self.msg.error = dumps(p)

    def result(self) -> AssembledMessage:
        if self._final is not None:
            return self._final
        self.msg.blocks = self._items or (
            [Block("text", text="".join(self._text))] if self._text else []
        )
        return self.msg

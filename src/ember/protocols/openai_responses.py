"""OpenAI Responses (``POST /v1/responses``).

Request: ``instructions`` (the system prompt) and ``input`` (a string, or a list of items:
role messages, ``function_call``, ``function_call_output``, ``reasoning``...). Streams are typed
events with a ``sequence_number``; ``response.completed`` carries the whole final response.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from ember.protocols.base import AssembledMessage, Block, ToolResult, Usage, text_of
from ember.protocols.jsonedit import JsonDoc, dumps
from ember.protocols.openai_chat import openai_error_body, openai_usage

_TEXT_PARTS = ("input_text", "output_text", "text")
_SYSTEM_ROLES = ("system", "developer")
_FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


def _items(body: Any) -> list[Any]:
    items = body.get("input") if isinstance(body, dict) else None
    return items if isinstance(items, list) else []


def _is_role(item: Any, roles: tuple[str, ...]) -> bool:
    return (
        isinstance(item, dict)
        and item.get("role") in roles
        and item.get("type", "message") == "message"
    )


class OpenAIResponsesAdapter:
    name: ClassVar[str] = "openai_responses"

    def model(self, body: Any) -> str | None:
        m = body.get("model") if isinstance(body, dict) else None
        return m if isinstance(m, str) else None

    def is_stream(self, body: Any) -> bool:
        return isinstance(body, dict) and body.get("stream") is True

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
        msg.id, msg.model = body.get("id"), body.get("model")
        msg.stop_reason = body.get("status")
        msg.usage = self.usage(body.get("usage")) if body.get("usage") else None
        for item in body.get("output") or []:
            block = _block_from_item(item)
            if block is not None:
                msg.blocks.append(block)
        return msg

    def assembler(self) -> ResponsesAssembler:
        return ResponsesAssembler()

    def error_body(self, status: int, message: str) -> bytes:
        return openai_error_body(status, message)


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
            self.msg.id, self.msg.model = p["response"].get("id"), p["response"].get("model")
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

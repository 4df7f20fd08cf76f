"""OpenAI Chat Completions (``POST /v1/chat/completions``).

The system prompt lives inside ``messages`` (role ``system`` or ``developer``); tool results are
messages of role ``tool``. Streams are ``data:`` chunks ending with ``data: [DONE]``.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from ember.protocols.base import AssembledMessage, Block, ToolResult, Usage, as_int, text_of
from ember.protocols.jsonedit import JsonDoc, dumps

_TEXT_PARTS = ("text", "input_text")
_SYSTEM_ROLES = ("system", "developer")

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    502: "upstream_error",
    504: "timeout_error",
}


def openai_error_body(status: int, message: str) -> bytes:
    """The error shape both OpenAI APIs use; the SDKs read ``error.message``."""
    kind = _ERROR_TYPES.get(status, "api_error")
    return dumps(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}
    ).encode()


def openai_usage(raw: Any, prompt_key: str, completion_key: str, details_key: str) -> Usage:
    """Split OpenAI's ``prompt``/``input`` count into fresh and cached input.

    OpenAI counts cached tokens inside the prompt total; without the split a cached prompt
    would be priced twice (once as input, once as cache read).
    """
    if not isinstance(raw, dict):
        return Usage()
    details = raw.get(details_key)
    cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    out_details = raw.get(completion_key + "_details")
    reasoning = as_int(out_details.get("reasoning_tokens")) if isinstance(out_details, dict) else 0
    prompt = as_int(raw.get(prompt_key))
    return Usage(
        input_tokens=max(prompt - cached, 0),
        cache_read_tokens=cached,
        output_tokens=as_int(raw.get(completion_key)),
        reasoning_tokens=reasoning,
    )


def _messages(body: Any) -> list[Any]:
    msgs = body.get("messages") if isinstance(body, dict) else None
    return msgs if isinstance(msgs, list) else []


class OpenAIChatAdapter:
    name: ClassVar[str] = "openai_chat"

    def model(self, body: Any) -> str | None:
        m = body.get("model") if isinstance(body, dict) else None
        return m if isinstance(m, str) else None

    def is_stream(self, body: Any) -> bool:
        return isinstance(body, dict) and body.get("stream") is True

    def system_text(self, body: Any) -> str:
        return "\n".join(
            text_of(m.get("content"), _TEXT_PARTS)
            for m in _messages(body)
            if isinstance(m, dict) and m.get("role") in _SYSTEM_ROLES
        )

    def message_count(self, body: Any) -> int:
        return len(_messages(body))

    def latest_user_index(self, body: Any) -> int | None:
        msgs = _messages(body)
        for i in range(len(msgs) - 1, -1, -1):
            if isinstance(msgs[i], dict) and msgs[i].get("role") == "user":
                return i
        return None

    def user_text(self, body: Any, index: int) -> str:
        msgs = _messages(body)
        m = msgs[index] if 0 <= index < len(msgs) else None
        return text_of(m.get("content"), _TEXT_PARTS) if isinstance(m, dict) else ""

    def first_user_text(self, body: Any) -> str | None:
        for m in _messages(body):
            if isinstance(m, dict) and m.get("role") == "user":
                return text_of(m.get("content"), _TEXT_PARTS)
        return None

    def tool_results(self, body: Any) -> list[ToolResult]:
        """The ``tool`` messages after the last assistant message."""
        out: list[ToolResult] = []
        for m in reversed(_messages(body)):
            if not isinstance(m, dict) or m.get("role") != "tool":
                break
            out.append(ToolResult(m.get("tool_call_id"), text_of(m.get("content"), _TEXT_PARTS)))
        return out[::-1]

    def append_system_tail(self, doc: JsonDoc, text: str) -> None:
        """Append to the last system/developer message; without one, nothing is created
        here (inserting a message at the head of the array would shift the whole prefix)."""
        msgs = _messages(doc.value)
        for i in range(len(msgs) - 1, -1, -1):
            if isinstance(msgs[i], dict) and msgs[i].get("role") in _SYSTEM_ROLES:
                _append_text(doc, i, text)
                return

    def append_user_tail(self, doc: JsonDoc, index: int, text: str) -> None:
        _append_text(doc, index, text)

    def usage(self, raw: Any) -> Usage:
        return openai_usage(raw, "prompt_tokens", "completion_tokens", "prompt_tokens_details")

    def parse_response(self, body: Any) -> AssembledMessage:
        msg = AssembledMessage(protocol=self.name, complete=True)
        if not isinstance(body, dict) or "error" in body:
            msg.error = dumps(body.get("error")) if isinstance(body, dict) else "not an object"
            return msg
        msg.id, msg.model = body.get("id"), body.get("model")
        msg.usage = self.usage(body.get("usage"))
        choices = body.get("choices") or []
        if choices and isinstance(choices[0], dict):
            choice = choices[0]
            msg.stop_reason = choice.get("finish_reason")
            m = choice.get("message") or {}
            if isinstance(m.get("content"), str) and m["content"]:
                msg.blocks.append(Block("text", text=m["content"]))
            for call in m.get("tool_calls") or []:
                fn = call.get("function") or {}
                msg.blocks.append(
                    Block(
                        "tool_use",
                        id=call.get("id"),
                        name=fn.get("name"),
                        input=_loads_or_raw(fn.get("arguments", "")),
                    )
                )
        return msg

    def assembler(self) -> ChatAssembler:
        return ChatAssembler()

    def error_body(self, status: int, message: str) -> bytes:
        return openai_error_body(status, message)


def _append_text(doc: JsonDoc, index: int, text: str) -> None:
    content = doc.value["messages"][index].get("content")
    part = {"type": "text", "text": text}
    if isinstance(content, list):
        doc.append(["messages", index, "content"], part)
    else:
        original = content if isinstance(content, str) else ""
        doc.replace(["messages", index, "content"], [{"type": "text", "text": original}, part])


def _loads_or_raw(raw: str) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except (json.JSONDecodeError, TypeError):
        return raw


class ChatAssembler:
    def __init__(self) -> None:
        self.msg = AssembledMessage(protocol=OpenAIChatAdapter.name)
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}

    def feed(self, event: str | None, data: str) -> None:
        if data.strip() == "[DONE]":
            self.msg.complete = True
            return
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            return
        if not isinstance(chunk, dict):
            return
        if "error" in chunk:
            self.msg.error = dumps(chunk["error"])
            return
        self.msg.id = self.msg.id or chunk.get("id")
        self.msg.model = self.msg.model or chunk.get("model")
        if chunk.get("usage"):
            self.msg.usage = OpenAIChatAdapter().usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        if choice.get("finish_reason"):
            self.msg.stop_reason = choice["finish_reason"]
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str):
            self._text.append(delta["content"])
        for tc in delta.get("tool_calls") or []:
            call = self._calls.setdefault(as_int(tc.get("index")), {"args": []})
            call["id"] = call.get("id") or tc.get("id")
            fn = tc.get("function") or {}
            call["name"] = call.get("name") or fn.get("name")
            if fn.get("arguments"):
                call["args"].append(fn["arguments"])

    def result(self) -> AssembledMessage:
        text = "".join(self._text)
        self.msg.blocks = [Block("text", text=text)] if text else []
        for i in sorted(self._calls):
            c = self._calls[i]
            self.msg.blocks.append(
                Block(
                    "tool_use",
                    id=c.get("id"),
                    name=c.get("name"),
                    input=_loads_or_raw("".join(c["args"])),
                )
            )
        return self.msg

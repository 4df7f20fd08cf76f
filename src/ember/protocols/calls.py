"""Every tool call in a conversation, by call id, whatever the wire format: one walk.

The transcript keeps a call as one readable line (``called Bash({...})``, cut at a limit) and
needs only a call's tool name to label its result; a feature that reasons about what a call
*did* (traffic learning: which command failed and which one worked) needs the arguments as
the client sent them. Both read the same walk here. Chat and Responses send arguments as a
JSON string: a string that does not parse is kept as ``{"_raw": text}`` rather than dropped,
so a call is never silently missing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ember.protocols import gemini_parts
from ember.protocols.base import ProtocolAdapter

#: (call id, tool name, the arguments as sent)
RawCall = tuple[str, str, Any]


@dataclass(frozen=True)
class Call:
    call_id: str
    name: str
    arguments: dict[str, Any]


def conversation(adapter: ProtocolAdapter, body: Any) -> list[Any]:
    """The messages (Anthropic, Chat), input items (Responses) or contents (Gemini) of
    ``body``."""
    if not isinstance(body, dict):
        return []
    if adapter.name == "gemini":
        return gemini_parts.contents(body)
    if adapter.name == "openai_responses":
        items = body.get("input")
        if isinstance(items, str):
            return [{"role": "user", "content": items}]
        return items if isinstance(items, list) else []
    messages = body.get("messages")
    return messages if isinstance(messages, list) else []


def _anthropic(messages: list[Any]) -> Iterator[RawCall]:
    """``tool_use`` blocks, server and MCP tool use included."""
    for m in messages:
        content = m.get("content") if isinstance(m, dict) and m.get("role") == "assistant" else None
        for b in content if isinstance(content, list) else []:
            kind = b.get("type") if isinstance(b, dict) else None
            if not isinstance(kind, str) or not kind.endswith("tool_use"):
                continue
            if isinstance(b.get("id"), str) and isinstance(b.get("name"), str):
                yield b["id"], b["name"], b.get("input")


def _chat(messages: list[Any]) -> Iterator[RawCall]:
    for m in messages:
        mine = isinstance(m, dict) and m.get("role") == "assistant"
        calls = m.get("tool_calls") if mine else None
        for c in calls if isinstance(calls, list) else []:
            fn = c.get("function") if isinstance(c, dict) else None
            if not isinstance(fn, dict) or not isinstance(c.get("id"), str):
                continue
            if isinstance(fn.get("name"), str):
                yield c["id"], fn["name"], fn.get("arguments")


def _responses(items: list[Any]) -> Iterator[RawCall]:
    """``function_call``, ``custom_tool_call``, ``local_shell_call``... items."""
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if isinstance(kind, str) and kind.endswith("_call") and "call_id" in item:
            name = item.get("name") or kind.removesuffix("_call")
            raw = next((item[k] for k in ("arguments", "input", "action") if k in item), None)
            yield str(item["call_id"]), name, raw


def _gemini(contents: list[Any]) -> Iterator[RawCall]:
    """``functionCall`` parts of model contents, keyed as ``gemini_parts.call_keys`` says
    (a call without an ``id`` is ``name#k``)."""
    for c in contents:
        if gemini_parts.is_model(c):
            for key, name, call in gemini_parts.call_keys(c):
                yield key, name, call.get("args")


WALKS: dict[str, Callable[[list[Any]], Iterator[RawCall]]] = {
    "anthropic": _anthropic,
    "openai_chat": _chat,
    "openai_responses": _responses,
    "gemini": _gemini,
}


def _parsed(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {"_raw": raw}
        return value if isinstance(value, dict) else {"_raw": raw}
    return {}


def tool_calls(adapter: ProtocolAdapter, body: Any) -> dict[str, Call]:
    """Every tool call the conversation of ``body`` holds, by call id (``{}`` for a body
    that is not an object or a wire format without calls)."""
    return tool_calls_of(adapter, conversation(adapter, body))


def tool_calls_of(adapter: ProtocolAdapter, messages: list[Any]) -> dict[str, Call]:
    """The tool calls of ``messages`` (a slice of a conversation), by call id."""
    walk = WALKS.get(adapter.name)
    if walk is None:
        return {}
    return {i: Call(i, str(n), _parsed(raw)) for i, n, raw in walk(messages)}


class NamesBefore(dict[str, str]):
    """Tool names by call id for reading the messages after ``earlier``: the ids set while
    those are read, then, on a miss, the calls of ``earlier`` walked back from its newest
    message until the id turns up (then ``fallback``, the names of what came before).

    A tool result's call sits in the message just before it, so a request of a long session
    walks one or two messages instead of its whole history: the transcript reads every
    request this way, and the full walk grew with the session (4% of the proxy's samples
    at 50 messages). The answers equal those of one forward walk of ``earlier`` before the
    reading (a later call of the same id wins, then the newest in ``earlier``, then
    ``fallback``)."""

    def __init__(
        self,
        walk: Callable[[list[Any]], Iterator[RawCall]],
        earlier: list[Any],
        fallback: dict[str, str],
    ) -> None:
        super().__init__()
        self._walk, self._earlier, self._fallback = walk, earlier, fallback
        self._unread = len(earlier)  # earlier[:_unread] not walked yet

    def get(self, key: str, default: Any = None) -> Any:
        while key not in self and self._unread > 0:
            self._unread -= 1
            calls = list(self._walk(self._earlier[self._unread : self._unread + 1]))
            for call_id, name, _ in reversed(calls):
                self.setdefault(call_id, str(name))  # newer (already set) names win
        if key in self:
            return self[key]
        return self._fallback.get(key, default)

"""The arguments of every tool call in a conversation, by call id, whatever the wire format.

The transcript keeps a call as one readable line (``called Bash({...})``, cut at a limit);
a feature that reasons about what a call *did* (traffic learning: which command failed and
which one worked) needs the arguments as the client sent them. Chat and Responses send them
as a JSON string: a string that does not parse is kept as ``{"_raw": text}`` rather than
dropped, so a call is never silently missing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ember.protocols.base import ProtocolAdapter


@dataclass(frozen=True)
class Call:
    call_id: str
    name: str
    arguments: dict[str, Any]


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


def _anthropic(body: dict[str, Any]) -> Iterator[Call]:
    for m in body.get("messages") or []:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        content = m.get("content")
        for b in content if isinstance(content, list) else []:
            ok = isinstance(b, dict) and b.get("type") == "tool_use"
            if ok and isinstance(b.get("id"), str) and isinstance(b.get("name"), str):
                yield Call(b["id"], b["name"], _parsed(b.get("input")))


def _chat(body: dict[str, Any]) -> Iterator[Call]:
    for m in body.get("messages") or []:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        for c in m.get("tool_calls") or []:
            fn = c.get("function") if isinstance(c, dict) else None
            if not isinstance(fn, dict) or not isinstance(c.get("id"), str):
                continue
            if isinstance(fn.get("name"), str):
                yield Call(c["id"], fn["name"], _parsed(fn.get("arguments")))


def _responses(body: dict[str, Any]) -> Iterator[Call]:
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("call_id"), str):
            continue
        kind = item.get("type")
        if isinstance(kind, str) and kind.endswith("_call"):
            name = item.get("name") or kind.removesuffix("_call")
            raw = next((item[k] for k in ("arguments", "input", "action") if k in item), None)
            yield Call(item["call_id"], str(name), _parsed(raw))


_CALLS: dict[str, Callable[[dict[str, Any]], Iterator[Call]]] = {
    "anthropic": _anthropic,
    "openai_chat": _chat,
    "openai_responses": _responses,
}


def tool_calls(adapter: ProtocolAdapter, body: Any) -> dict[str, Call]:
    """Every tool call the conversation of ``body`` holds, by call id (``{}`` for a body
    that is not an object or a wire format without calls)."""
    calls = _CALLS.get(adapter.name)
    if calls is None or not isinstance(body, dict):
        return {}
    return {c.call_id: c for c in calls(body)}

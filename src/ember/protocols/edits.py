"""The edits ember makes to a request, written once over every wire format.

Each adapter only says *where* (``system_slot``, ``user_slot``, ``param_paths``: reads of the
body); each edit here says *what*, through ``JsonDoc``'s byte splices. Adding an edit touches
this module, not three adapters.

The rule every edit keeps: the client's bytes stay as they were. A block is added after the
client's last one, never into it (Claude Code marks its ``cache_control`` breakpoint there,
and moving or dropping it would cost the whole session its cache); ember's own region is
replaced in place, so editing an edited body changes nothing; nothing is inserted in front of
the client's prefix.
"""

from __future__ import annotations

from typing import Any

from ember.protocols.base import ProtocolAdapter, TextSlot
from ember.protocols.content import find_region, replace_region
from ember.protocols.jsonedit import JsonDoc
from ember.protocols.outputs import ToolOutput

__all__ = [
    "append_user_tail",
    "owned_system_block",
    "put_system_block",
    "replace_tool_output",
    "set_effort",
    "set_thinking_budget",
    "set_verbosity",
]


def append_user_tail(adapter: ProtocolAdapter, doc: JsonDoc, index: int, text: str) -> None:
    """Add a text part after the client's last part of message ``index`` (a string content
    becomes its own part first, unchanged)."""
    slot = adapter.user_slot(doc.value, index)
    if isinstance(slot.value, list):
        doc.append(list(slot.path), _part(slot, text))
        return
    original = slot.value if isinstance(slot.value, str) else ""
    doc.replace(list(slot.path), _parts(slot, original, text))


def replace_tool_output(doc: JsonDoc, output: ToolOutput, text: str) -> None:
    """Put ``text`` in place of a tool output's value (a string where the client sent a
    string or text parts): the block or item around it — its call id, ``is_error``,
    ``cache_control`` — keeps the client's bytes."""
    doc.replace(list(output.path), text)


def put_system_block(
    adapter: ProtocolAdapter,
    doc: JsonDoc,
    open_tag: str,
    close_tag: str,
    block: str,
    *,
    inherits_system: bool = True,
) -> bool:
    """Put ember's block at the tail of the system prompt, or replace ember's region where one
    is there already; False when the request has no place for it (nothing is edited)."""
    slot = adapter.system_slot(doc.value, inherits_system=inherits_system)
    return slot is not None and _put_region(doc, slot, open_tag, close_tag, block)


def owned_system_block(
    adapter: ProtocolAdapter, body: Any, open_tag: str, close_tag: str
) -> str | None:
    """The text of ember's region in the system prompt, if one is there."""
    for text in adapter.system_texts(body):
        span = find_region(text, open_tag, close_tag)
        if span is not None:
            return text[span[0] : span[1]]
    return None


def set_effort(adapter: ProtocolAdapter, doc: JsonDoc, value: str) -> bool:
    return _set(doc, adapter.param_paths(doc.value).effort, value)


def set_thinking_budget(adapter: ProtocolAdapter, doc: JsonDoc, tokens: int) -> bool:
    return _set(doc, adapter.param_paths(doc.value).thinking_budget, tokens)


def set_verbosity(adapter: ProtocolAdapter, doc: JsonDoc, value: str) -> bool:
    return _set(doc, adapter.param_paths(doc.value).verbosity, value)


def _put_region(doc: JsonDoc, slot: TextSlot, open_tag: str, close_tag: str, block: str) -> bool:
    path, value = list(slot.path), slot.value
    if value is None:
        *parent, key = path
        doc.set_key(parent, str(key), block if slot.joins else [_part(slot, block)])
        return True
    if isinstance(value, str):
        if slot.joins or find_region(value, open_tag, close_tag) is not None:
            return replace_region(doc, path, value, open_tag, close_tag, block)
        doc.replace(path, _parts(slot, value, block))
        return True
    if not isinstance(value, list):
        return False
    for j in range(len(value) - 1, -1, -1):
        text = value[j].get("text") if isinstance(value[j], dict) else None
        if isinstance(text, str) and find_region(text, open_tag, close_tag) is not None:
            return replace_region(doc, [*path, j, "text"], text, open_tag, close_tag, block)
    doc.append(path, _part(slot, block))
    return True


def _set(doc: JsonDoc, path: tuple[str | int, ...] | None, value: Any) -> bool:
    """Write ``value`` at ``path``: in place, or as a new last key of its object, or (the
    object itself absent) as a new object holding only it."""
    if path is None:
        return False
    *parent, key = path
    container = _at(doc.value, parent)
    if isinstance(container, dict):
        doc.set_key(parent, str(key), value)
        return True
    if container is None and parent and isinstance(_at(doc.value, parent[:-1]), dict):
        doc.set_key(parent[:-1], str(parent[-1]), {key: value})
        return True
    return False


def _at(value: Any, path: list[str | int]) -> Any:
    for key in path:
        if isinstance(value, dict) and isinstance(key, str):
            value = value.get(key)
        elif isinstance(value, list) and isinstance(key, int) and 0 <= key < len(value):
            value = value[key]
        else:
            return None
    return value


def _part(slot: TextSlot, text: str) -> dict[str, str]:
    return {"text": text} if slot.part_type is None else {"type": slot.part_type, "text": text}


def _parts(slot: TextSlot, first: str, then: str) -> Any:
    parts = [_part(slot, first), _part(slot, then)]
    return [{"role": slot.message_role, "content": parts}] if slot.message_role else parts

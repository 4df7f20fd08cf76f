"""Anthropic cache breakpoints: where a request has them, and the one a shadow fork needs.

The cache is hashed in the order tools -> system -> messages; an entry is written at each block
that carries ``cache_control`` and read back by a later request whose prefix is byte-identical
up to a breakpoint of its own (looking back at most 20 blocks). ``cache_control`` itself is not
part of the prefix's identity: Claude Code moves its marker to the newest block every turn and
still reads yesterday's entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ember.protocols.jsonedit import JsonDoc

#: The API refuses a request with more blocks carrying ``cache_control`` than this (a
#: top-level automatic ``cache_control`` takes one of them).
MAX_BREAKPOINTS = 4


@dataclass(frozen=True)
class Mark:
    """A block carrying ``cache_control``: the path of the block and the marker's ``ttl``."""

    path: tuple[str | int, ...]
    ttl: Any


def _marks_in(blocks: Any, path: tuple[str | int, ...], nested: bool) -> list[Mark]:
    found: list[Mark] = []
    for i, block in enumerate(blocks if isinstance(blocks, list) else []):
        if not isinstance(block, dict):
            continue
        marker = block.get("cache_control")
        if isinstance(marker, dict):
            found.append(Mark((*path, i), marker.get("ttl")))
        if nested:  # a tool_result's own content blocks may carry markers too
            found += _marks_in(block.get("content"), (*path, i, "content"), False)
    return found


def breakpoints(body: Any) -> list[Mark]:
    """Every explicit breakpoint, in prefix order (tools, system, then message blocks)."""
    if not isinstance(body, dict):
        return []
    found = _marks_in(body.get("tools"), ("tools",), False)
    found += _marks_in(body.get("system"), ("system",), False)
    for m, message in enumerate(body.get("messages") or []):
        if isinstance(message, dict):
            found += _marks_in(message.get("content"), ("messages", m, "content"), True)
    return found


def automatic(body: Any) -> dict[str, Any] | None:
    """The top-level ``cache_control`` (automatic mode: one breakpoint on the last block)."""
    marker = body.get("cache_control") if isinstance(body, dict) else None
    return marker if isinstance(marker, dict) else None


def caches_anything(body: Any) -> bool:
    return bool(breakpoints(body)) or automatic(body) is not None


def _last_block_marked(content: Any) -> bool:
    if not isinstance(content, list) or not content or not isinstance(content[-1], dict):
        return False
    return content[-1].get("cache_control") is not None


def mark_prefix_end(doc: JsonDoc, last: int | None = None) -> None:
    """Make the last block of the last message (or of message ``last``: the turn's own last
    message, before a client's trailing system note, which is no place for a breakpoint) a
    breakpoint, if it is not one already.

    Without it a fork that appends several messages has its only message breakpoints where
    the client left them: an entry the recorded request wrote further back than 20 blocks
    from them is never read, and the fork pays full price for the history it came to reuse.

    The marker copies ``ttl: "1h"`` when the breakpoint before it (or the automatic one after
    it) has it: a 5-minute marker before a 1-hour one is refused with a 400, and a 5-minute one
    after 1-hour ones is allowed. When the request already has four breakpoints, the earliest
    one is dropped: the latest breakpoint of the recorded request was written (or read) when
    that request was sent moments ago, so a read there covers everything an earlier
    breakpoint could; adding a fifth would be refused with a 400.
    """
    if last is None:
        last = len(doc.value["messages"]) - 1
    content = doc.value["messages"][last].get("content")
    if _last_block_marked(content):
        return
    marks = breakpoints(doc.value)
    auto = automatic(doc.value)
    if marks and len(marks) + (auto is not None) >= MAX_BREAKPOINTS:
        doc.delete_key(list(marks[0].path), "cache_control")
        marks = marks[1:]
    long = (marks and marks[-1].ttl == "1h") or (auto is not None and auto.get("ttl") == "1h")
    marker = {"type": "ephemeral", **({"ttl": "1h"} if long else {})}
    if isinstance(content, str):
        block = {"type": "text", "text": content, "cache_control": marker}
        doc.replace(["messages", last, "content"], [block])
    else:
        doc.set_key(["messages", last, "content", len(content) - 1], "cache_control", marker)

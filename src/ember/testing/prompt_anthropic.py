"""An Anthropic Messages request seen as the prompt cache sees it: a chain of blocks.

The prefix order is tools -> system -> messages. Every tool definition, every system block (a
string system is one block) and every message content block (string content is one block) is
one block. A block's identity is its canonical JSON without ``cache_control`` (a string is
identical to a single ``{"type": "text"}`` block); the first block of a message also carries the
role, so regrouping blocks into different turns is a different prompt.

``hashes[i]`` commits to blocks ``0..i``. Entering the messages region mixes in a salt made of
``tool_choice`` and ``thinking``, so changing either misses every message entry while tool and
system entries stay readable, as on the real API.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ember.testing.tokens import canonical_json, count_tokens

TTL_5M = 300.0
TTL_1H = 3600.0
MAX_BREAKPOINTS = 4
_TTLS = {None: TTL_5M, "5m": TTL_5M, "1h": TTL_1H}


class CacheControlError(ValueError):
    """The request's ``cache_control`` markers are ones the real API rejects with a 400."""


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """A block carrying ``cache_control``: where an entry may be written, and its TTL."""

    index: int
    ttl: float


@dataclass(frozen=True, slots=True)
class AnthropicPrompt:
    """The hash chain, running token totals and breakpoints of one request.

    Invariants: ``len(hashes) == len(cumulative)``; ``cumulative[i]`` is the token count of
    blocks ``0..i``; ``breakpoints`` are sorted by index, unique, and validated (at most four,
    no 1h after a 5m).
    """

    model: str
    hashes: list[bytes]
    cumulative: list[int]
    breakpoints: list[Breakpoint]

    @property
    def total_tokens(self) -> int:
        return self.cumulative[-1] if self.cumulative else 0


def _ttl(marker: Any) -> float:
    if not isinstance(marker, dict):
        raise CacheControlError("cache_control: Input should be an object")
    ttl = marker.get("ttl")
    if ttl not in _TTLS:
        raise CacheControlError(f"cache_control.ttl: Input should be '5m' or '1h', got {ttl!r}")
    return _TTLS[ttl]


def _marker(block: Any) -> Any:
    """The block's ``cache_control``, or one set on a block nested in its ``content``."""
    if not isinstance(block, dict):
        return None
    if block.get("cache_control") is not None:
        return block["cache_control"]
    content = block.get("content")
    if isinstance(content, list):
        for inner in content:
            if isinstance(inner, dict) and inner.get("cache_control") is not None:
                return inner["cache_control"]
    return None


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    return []


def _without_marker(block: Any) -> Any:
    """``block`` minus ``cache_control`` on itself and on blocks in its ``content``.

    Those are the only places the API accepts a marker, so a shallow copy suffices and the
    common unmarked block is used as is (this runs for every block of every request).
    """
    if not isinstance(block, dict):
        return block
    content = block.get("content")
    if isinstance(content, list) and any(
        isinstance(inner, dict) and "cache_control" in inner for inner in content
    ):
        content = [
            {k: v for k, v in inner.items() if k != "cache_control"}
            if isinstance(inner, dict)
            else inner
            for inner in content
        ]
        block = {**block, "content": content}
    if "cache_control" in block:
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return block


_TOKEN_MEMO: dict[str, int] = {}
_TOKEN_MEMO_LIMIT = 1 << 16


def _describe(block: Any) -> tuple[str, int]:
    """The block's identity (canonical JSON, no markers) and its token count.

    Counts are memoised by identity: an agent resends the same prefix blocks on every turn,
    so only new blocks are tokenised and the emulator's cost per request stays small.
    """
    identity = canonical_json(_without_marker(block))
    tokens = _TOKEN_MEMO.get(identity)
    if tokens is None:
        if (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            tokens = count_tokens(block["text"])
        else:
            tokens = count_tokens(identity)
        if len(_TOKEN_MEMO) >= _TOKEN_MEMO_LIMIT:
            _TOKEN_MEMO.clear()
        _TOKEN_MEMO[identity] = tokens
    return identity, tokens


def iter_blocks(body: dict[str, Any]) -> Iterator[tuple[str, Any, str]]:
    """``(region, block, role)`` in prefix order; ``role`` is set on a turn's first block only."""
    for tool in body.get("tools") or []:
        yield "tools", tool, ""
    for block in _as_blocks(body.get("system")):
        yield "system", block, ""
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", ""))
        for i, block in enumerate(_as_blocks(message.get("content"))):
            yield "messages", block, role if i == 0 else ""


def _salt(body: dict[str, Any]) -> bytes:
    return canonical_json([body.get("tool_choice"), body.get("thinking")]).encode()


def _validate(breakpoints: list[Breakpoint], automatic: bool) -> None:
    count = len(breakpoints) + (1 if automatic else 0)
    if count > MAX_BREAKPOINTS:
        raise CacheControlError(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {count}."
        )


def _check_ttl_order(breakpoints: list[Breakpoint]) -> None:
    seen_short = False
    for bp in breakpoints:
        if bp.ttl == TTL_5M:
            seen_short = True
        elif seen_short:
            raise CacheControlError(
                "A cache_control block with ttl='1h' must not come after a block with "
                "ttl='5m': longer-lived breakpoints must come first."
            )


def parse_prompt(body: dict[str, Any]) -> AnthropicPrompt:
    """Flatten a Messages request body; raises :class:`CacheControlError` on bad markers."""
    hashes: list[bytes] = []
    cumulative: list[int] = []
    explicit: list[Breakpoint] = []
    prev = b""
    running = 0
    in_messages = False
    for region, block, role in iter_blocks(body):
        if region == "messages" and not in_messages:
            in_messages = True
            prev = hashlib.blake2b(prev + b"\x1dsalt" + _salt(body), digest_size=16).digest()
        identity, tokens = _describe(block)
        prev = hashlib.blake2b(
            prev + b"\x1e" + role.encode() + b"\x1f" + identity.encode(), digest_size=16
        ).digest()
        hashes.append(prev)
        running += tokens
        cumulative.append(running)
        marker = _marker(block)
        if marker is not None:
            explicit.append(Breakpoint(len(hashes) - 1, _ttl(marker)))
    automatic = body.get("cache_control") is not None
    _validate(explicit, automatic)
    breakpoints = explicit
    if automatic and hashes:
        last = len(hashes) - 1
        if not any(bp.index == last for bp in explicit):
            breakpoints = [*explicit, Breakpoint(last, _ttl(body["cache_control"]))]
    _check_ttl_order(breakpoints)
    return AnthropicPrompt(str(body.get("model", "")), hashes, cumulative, breakpoints)


def _text_of(content: Any) -> str:
    parts: list[str] = []
    for block in _as_blocks(content):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "tool_result":
            parts.append(_text_of(block.get("content")))
    return " ".join(p for p in parts if p)


def latest_user_text(body: dict[str, Any]) -> str:
    """Text of the last user turn (tool results included), for the default reply."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""

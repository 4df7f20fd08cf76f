"""Scripted, protocol-agnostic replies, and the deterministic default reply.

A :class:`Reply` says *what* the model answers (text, tool calls, thinking, or an error) and
*how* the wire behaves (delays, a cut connection); the ``render_*`` modules turn it into each
protocol's JSON body or SSE events. Nothing here depends on time or randomness: the same
request always gets the same default answer, and a thinking block always gets the same
signature, so replayed conversations stay byte-identical and cache-friendly.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ember.testing.tokens import count_tokens

DEFAULT_SENTENCE = "This is a deterministic reply from the Ember provider emulator."
_SIGNATURE_SALT = b"ember-emulator-thinking-v1:"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool invocation in a reply; ``id`` is generated per response when omitted.

    ``namespace``: the Responses API's tool namespace the call belongs to. Codex lists an MCP
    server's tools as one ``{"type": "namespace", "name": "mcp__ember", "tools": [...]}`` and
    runs a ``function_call`` only when it names that namespace apart from the bare tool name;
    the other wire formats have no namespaces and ignore it."""

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    namespace: str | None = None

    @property
    def arguments(self) -> str:
        """The input as the JSON string that goes on the wire (compact, key order kept)."""
        return json.dumps(self.input, separators=(",", ":"), ensure_ascii=False)


ToolCallLike = ToolCall | tuple[str, Mapping[str, Any]] | Mapping[str, Any]


def _tool_call(value: ToolCallLike) -> ToolCall:
    if isinstance(value, ToolCall):
        return value
    if isinstance(value, tuple):
        return ToolCall(value[0], dict(value[1]))
    return ToolCall(
        str(value["name"]), dict(value.get("input", {})), value.get("id"), value.get("namespace")
    )


@dataclass(frozen=True, init=False)
class Reply:
    """What the emulated model answers to one request.

    ``status`` other than 200 makes this an error reply (``message`` / ``error_type`` give its
    body, ``headers`` e.g. a ``retry-after``). Wire behaviour: ``delay_headers`` seconds before
    anything is sent (lets a caller's timeout fire), ``delay`` seconds between SSE events (a
    slow stream), ``cut_after`` SSE events then the connection is dropped without finishing the
    body (for a JSON answer: the headers and half the body).

    Failures after a 200: ``error_after`` SSE events, then the protocol's in-stream error
    (``error_type`` / ``message``: Anthropic's ``error`` event, a Chat chunk holding ``error``,
    Responses' ``response.failed``) and a clean end; a JSON answer becomes a 200 body holding
    the error. ``close_after`` SSE events, then the body ends cleanly without the stream's
    final event (a JSON answer is unaffected).
    """

    text: str
    tool_calls: tuple[ToolCall, ...]
    thinking: str | None
    status: int
    message: str
    error_type: str | None
    headers: Mapping[str, str]
    cut_after: int | None
    delay: float
    delay_headers: float
    error_after: int | None
    close_after: int | None

    def __init__(
        self,
        text: str = "",
        tool_calls: Iterable[ToolCallLike] = (),
        *,
        thinking: str | None = None,
        status: int = 200,
        message: str = "",
        error_type: str | None = None,
        headers: Mapping[str, str] | None = None,
        cut_after: int | None = None,
        delay: float = 0.0,
        delay_headers: float = 0.0,
        error_after: int | None = None,
        close_after: int | None = None,
    ) -> None:
        values = {
            "text": text,
            "tool_calls": tuple(_tool_call(c) for c in tool_calls),
            "thinking": thinking,
            "status": status,
            "message": message,
            "error_type": error_type,
            "headers": dict(headers or {}),
            "cut_after": cut_after,
            "delay": delay,
            "delay_headers": delay_headers,
            "error_after": error_after,
            "close_after": close_after,
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def is_error(self) -> bool:
        return self.status != 200

    @classmethod
    def tool_use(
        cls, name: str, input: Mapping[str, Any] | None = None, *, text: str = "", **options: Any
    ) -> Reply:
        """A single tool call, optionally after some text."""
        return cls(text, [ToolCall(name, dict(input or {}))], **options)

    @classmethod
    def error(
        cls, status: int, message: str, error_type: str | None = None, **options: Any
    ) -> Reply:
        """An HTTP error in the protocol's own error shape."""
        if status == 200:
            raise ValueError("an error reply needs a non-200 status")
        return cls(status=status, message=message, error_type=error_type, **options)

    @classmethod
    def failing(
        cls, error_type: str, message: str, *, after: int = 3, text: str = "", **options: Any
    ) -> Reply:
        """A 200 answer that fails midway: ``after`` events of the stream (generating
        ``text``), then the error event of type ``error_type`` (``overloaded_error``,
        ``server_error``...). As a JSON answer: a 200 body that is the error itself."""
        text = text or "This answer starts well but will not get to its end."
        return cls(text, error_after=after, error_type=error_type, message=message, **options)

    def replace(self, **changes: Any) -> Reply:
        """A copy with some fields changed."""
        fields = {f: getattr(self, f) for f in self.__dataclass_fields__}
        fields.update(changes)
        return Reply(fields.pop("text"), fields.pop("tool_calls"), **fields)

    def output_tokens(self) -> int:
        """Tokens of everything the reply generates; at least 1, as on the real APIs."""
        total = count_tokens(self.text) + count_tokens(self.thinking or "")
        total += sum(count_tokens(c.name) + count_tokens(c.arguments) for c in self.tool_calls)
        return max(total, 1)


def signature_for(thinking: str) -> str:
    """The deterministic ``signature`` the emulator puts on a thinking block."""
    digest = hashlib.sha256(_SIGNATURE_SALT + thinking.encode()).digest()
    return "EmuSig" + base64.b64encode(digest).decode()


def signature_is_valid(thinking: str, signature: str) -> bool:
    """Whether ``signature`` is the one the emulator issued for exactly this ``thinking``."""
    return signature == signature_for(thinking)


def _first_words(text: str, count: int = 12) -> str:
    words = text.split()
    head = " ".join(words[:count])
    return head + (" ..." if len(words) > count else "")


def default_reply(user_text: str) -> Reply:
    """The answer when nothing is scripted: a function of the latest user text only."""
    head = _first_words(user_text) or "(no text)"
    return Reply(text=f"Noted: {head}. {DEFAULT_SENTENCE}")


def default_thinking(user_text: str) -> str:
    """The thinking text added when a request enables thinking and the reply has none."""
    head = _first_words(user_text, 6) or "the request"
    return f"The user wrote: {head}. A short, direct answer fits."

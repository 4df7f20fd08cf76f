"""Shapes shared by every wire-format adapter.

Only ``ember.protocols`` knows wire formats. The rest of ember reads a request through an
adapter's pure functions and edits it through the adapter's edit functions, which splice into
the client's original bytes (see ``jsonedit``). The types here are the protocol-neutral results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from ember.protocols.jsonedit import JsonDoc


@dataclass(frozen=True)
class Usage:
    """Token usage normalised across providers.

    ``input_tokens`` is fresh (uncached) input only, so the four input counters never overlap:
    OpenAI's ``prompt_tokens`` includes its cached tokens and is split here, Anthropic's three
    counters are already disjoint. ``cache_write_1h_tokens`` is the part of
    ``cache_write_tokens`` written with a one-hour TTL (priced higher).
    """

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass
class Block:
    """One piece of an assistant answer.

    ``type`` is ``text``, ``tool_use``, ``thinking`` or ``redacted_thinking``. A thinking block
    keeps its ``signature`` verbatim: replaying a modified thinking block is rejected by the
    provider with a 400, so later features must be able to send it back byte-for-byte.
    """

    type: str
    text: str = ""
    id: str | None = None
    name: str | None = None
    input: Any = None
    signature: str | None = None
    data: str | None = None


@dataclass
class AssembledMessage:
    """The final answer of one exchange, from a JSON body or assembled from a stream."""

    protocol: str
    id: str | None = None
    model: str | None = None
    blocks: list[Block] = field(default_factory=list)
    stop_reason: str | None = None
    usage: Usage | None = None
    complete: bool = False
    error: str | None = None

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.blocks if b.type == "text")

    @property
    def tool_calls(self) -> list[Block]:
        return [b for b in self.blocks if b.type == "tool_use"]


@dataclass(frozen=True)
class ToolResult:
    tool_use_id: str | None
    content: str
    is_error: bool = False


class StreamAssembler(Protocol):
    """Consumes the SSE events of one streamed answer and assembles the final message.

    ``feed`` never raises on odd events (a provider adding a new event type must not break
    accounting); unknown events are ignored.
    """

    def feed(self, event: str | None, data: str) -> None: ...

    def result(self) -> AssembledMessage: ...


class ProtocolAdapter(Protocol):
    """Everything ember needs to know about one wire format; all methods are pure."""

    name: ClassVar[str]

    def model(self, body: Any) -> str | None: ...

    def is_stream(self, body: Any) -> bool: ...

    def system_text(self, body: Any) -> str: ...

    def latest_user_index(self, body: Any) -> int | None: ...

    def user_text(self, body: Any, index: int) -> str: ...

    def first_user_text(self, body: Any) -> str | None: ...

    def tool_results(self, body: Any) -> list[ToolResult]: ...

    def message_count(self, body: Any) -> int: ...

    def append_system_tail(self, doc: JsonDoc, text: str) -> None: ...

    def append_user_tail(self, doc: JsonDoc, index: int, text: str) -> None: ...

    def parse_response(self, body: Any) -> AssembledMessage: ...

    def usage(self, raw: Any) -> Usage: ...

    def assembler(self) -> StreamAssembler: ...

    def error_body(self, status: int, message: str) -> bytes: ...


def as_int(value: Any) -> int:
    """A usage counter as an int; providers send null or omit counters they do not track."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def text_of(content: Any, text_types: tuple[str, ...] = ("text",)) -> str:
    """The plain text of a string or a list of content blocks (non-text blocks skipped)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [
        b["text"]
        for b in content
        if isinstance(b, dict) and b.get("type") in text_types and isinstance(b.get("text"), str)
    ]
    return "\n".join(parts)

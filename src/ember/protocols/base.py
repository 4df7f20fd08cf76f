"""Shapes shared by every wire-format adapter.

Only ``ember.protocols`` knows wire formats. The rest of ember reads a request through an
adapter's pure functions and edits it through the adapter's edit functions, which splice into
the client's original bytes (see ``jsonedit``). The types here are the protocol-neutral results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from ember.protocols.content import as_str, offers_tools


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

    ``type`` is ``text``, ``tool_use``, ``thinking`` or ``redacted_thinking``, or for a part ember
    does not model (Anthropic ``server_tool_use``, a Responses ``web_search_call``...) the
    provider's own type. A thinking block keeps its ``signature`` verbatim: replaying a
    modified thinking block is rejected by the provider with a 400, so later features must be
    able to send it back byte-for-byte.

    ``raw`` is the provider's own JSON of this part when ember received it whole (a content
    block or output item of a JSON answer, a Responses item from the stream, a Chat tool call
    with its arguments string as streamed). Replaying an answer (shadow forks) starts from it:
    a Responses reasoning item rebuilt from ``text`` and ``signature`` would lose its ``id``
    and summary parts, and an item type ember does not model would be lost altogether.
    """

    type: str
    text: str = ""
    id: str | None = None
    name: str | None = None
    input: Any = None
    signature: str | None = None
    data: str | None = None
    raw: dict[str, Any] | None = None


@dataclass(frozen=True)
class AnswerError:
    """An error the provider reported in the body of an answer rather than by its HTTP status:
    an error event inside a stream that began with 200, or a 200 JSON body holding an error.

    ``type`` is the provider's own error type or code (``overloaded_error``, ``server_error``),
    which accounting keeps beside the status the client saw (the 200), so such an answer is
    counted with the failures it is, not as a 200 that went well; ``status`` is the HTTP status
    the provider gives the same error when it can still choose one (``overloaded_error`` is
    529): logged, and what a request refused before it began is answered with.
    """

    type: str
    message: str
    status: int

    def describe(self, limit: int = 300) -> str:
        text = f"{self.type}: {self.message}" if self.message else self.type
        return text if len(text) <= limit else text[: limit - 3] + "..."


def not_an_object() -> AnswerError:
    """A 200 answer whose JSON is not an object: no client can read it (502, Bad Gateway)."""
    return AnswerError("invalid_response", "the answer is not a JSON object", 502)


@dataclass
class AssembledMessage:
    """The final answer of one exchange, from a JSON body or assembled from a stream.

    ``complete`` says the answer's terminal event was seen (Anthropic ``message_stop`` or a
    ``message_delta`` with a stop reason, Chat ``[DONE]`` or a ``finish_reason``, Responses
    ``response.completed`` / ``response.incomplete`` / ``response.failed``); a parsed JSON body
    is complete. ``error`` is set when the answer itself reports an error, whatever its status.
    """

    protocol: str
    id: str | None = None
    model: str | None = None
    blocks: list[Block] = field(default_factory=list)
    stop_reason: str | None = None
    usage: Usage | None = None
    complete: bool = False
    error: AnswerError | None = None

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


TranscriptRole = Literal["user", "assistant", "tool"]
TranscriptKind = Literal["user", "assistant", "tool_result", "tool_error"]


@dataclass(frozen=True)
class TranscriptItem:
    """One piece of a conversation as the transcript stores it, whatever the wire format.

    ``position`` is the message's index in the conversation as the adapter counts messages
    (Anthropic/Chat ``messages``, Responses ``input`` items), so a message keeps its position
    when the client resends it as history; ``part`` tells apart the items one message yields
    (an Anthropic user message with several tool results: the block index). Together they are
    stable across the requests of one thread.

    ``kind``: ``user`` is the user's own text (client context such as ``<system-reminder>`` or
    ``<environment_context>`` taken out), ``assistant`` the model's visible text and tool calls
    (a ``called name(args)`` line each; thinking is not transcript), ``tool_result`` /
    ``tool_error`` a tool's output, an error by structure only (``is_error`` or structured
    fields). ``call_ids`` are the calls an assistant item made, or the one call a tool item
    answers; ``tool_name`` is that call's tool, when the conversation says it.
    """

    position: int
    part: int
    role: TranscriptRole
    kind: TranscriptKind
    text: str
    call_ids: tuple[str, ...] = ()
    tool_name: str | None = None


#: What one part of the latest input turn *is*, by structure only (block/item type, role,
#: ``is_error`` or a structured error field) -- never by what its text says.
PartKind = Literal["text", "image", "document", "tool_result", "tool_error", "other"]

#: Cache lifetimes the adapters report (seconds): Anthropic's default and ``ttl: "1h"``,
#: OpenAI's in-memory retention (documented as up to an hour idle) and ``24h`` retention.
TTL_5_MINUTES = 300.0
TTL_1_HOUR = 3600.0
TTL_24_HOURS = 86400.0


@dataclass(frozen=True)
class EffortFields:
    """The effort-like parameters of a request as the client sent them (``None`` = absent).

    ``effort`` is Anthropic ``output_config.effort`` or OpenAI ``reasoning.effort`` /
    ``reasoning_effort``; ``verbosity`` is OpenAI ``text.verbosity`` (Responses) or
    ``verbosity`` (Chat). ``verbosity_creatable`` says the wire format has a place where a
    verbosity can be added without rewriting another parameter.
    """

    effort: str | None = None
    thinking_type: str | None = None
    thinking_budget: int | None = None
    verbosity: str | None = None
    verbosity_creatable: bool = False


class StreamAssembler(Protocol):
    """Consumes the SSE events of one streamed answer and assembles the final message.

    ``feed`` never raises on odd events (a provider adding a new event type must not break
    accounting); unknown events are ignored.
    """

    def feed(self, event: str | None, data: str) -> None: ...

    def result(self) -> AssembledMessage: ...


@dataclass(frozen=True)
class TextSlot:
    """Where a piece of a request's prompt text lives, as the edits of ``protocols.edits`` see
    it: the adapter says where, the edit is written once for every wire format.

    ``value`` is what is at ``path``: a string, a list of parts, or None (absent: an edit may
    create it there). ``part_type`` is the type of a text part in such a list (``text``,
    ``input_text``); None: a text part has no type field (Gemini's ``{"text": ...}``, where a
    ``type`` is an unknown field the API refuses with a 400). ``joins``: a string gets more
    text after a blank line and stays a string (OpenAI instructions and system messages: some
    compatible servers refuse part lists there); otherwise it becomes a list of parts, the
    client's text first, unchanged.
    ``message_role``: the string is a whole input (Responses ``input: "..."``), so its parts
    become one message of this role."""

    path: tuple[str | int, ...]
    value: Any
    part_type: str | None = "text"
    joins: bool = False
    message_role: str | None = None


@dataclass(frozen=True)
class ParamPaths:
    """Where each effort-like parameter is written (None: nowhere; the edit then does not
    happen). A path is given only where writing cannot add a parameter the request must not
    have: effort and thinking budgets only where the client sent them (a model that does not
    take them answers 400), a verbosity where the wire format has a place for one."""

    effort: tuple[str | int, ...] | None = None
    thinking_budget: tuple[str | int, ...] | None = None
    verbosity: tuple[str | int, ...] | None = None


class ProviderBases(Protocol):
    """The base URLs of the providers (``Settings`` has them): where a request goes."""

    @property
    def anthropic_url(self) -> str: ...

    @property
    def openai_url(self) -> str: ...

    @property
    def gemini_url(self) -> str: ...


def with_query(url: str, query: str) -> str:
    return f"{url}?{query}" if query else url


class ProtocolAdapter(Protocol):
    """Everything ember needs to know about one wire format; all methods are pure.

    What the rest of ember asks of a wire format it asks here: code outside ``ember.protocols``
    never compares a wire format's name (a branch on ``"anthropic"`` in a feature is one more
    place a new wire format silently takes the wrong way: Gemini's requests counted as
    OpenAI's, or were sent a header scheme they refuse).
    """

    name: ClassVar[str]
    #: the provider behind the format (``anthropic``, ``openai`` for both OpenAI APIs,
    #: ``gemini``): what shares a base URL, an API key, a reachability record and prices
    family: ClassVar[str]
    #: the values its effort parameter takes, lowest first (empty: it has none)
    effort_levels: ClassVar[tuple[str, ...]]

    def upstream_url(self, bases: ProviderBases, path: str, query: str = "") -> str:
        """The provider URL of a client's ``path`` (and query string) in this format."""
        ...

    def key_headers(self, key: str) -> list[tuple[str, str]]:
        """The headers that carry an API key to this format's provider (ember's own calls
        made with a configured key, not the client's)."""
        ...

    def model(self, body: Any) -> str | None: ...

    def is_stream(self, body: Any) -> bool: ...

    def system_text(self, body: Any) -> str: ...

    def latest_user_index(self, body: Any) -> int | None: ...

    def user_text(self, body: Any, index: int) -> str: ...

    def first_user_text(self, body: Any) -> str | None: ...

    def leading_user_texts(self, body: Any, count: int) -> list[str]:
        """The texts of the first ``count`` user messages, oldest first (system and developer
        messages, however many a client sends ahead of them, are not counted)."""
        ...

    def tool_results(self, body: Any) -> list[ToolResult]: ...

    def recent_context(self, body: Any, before: int) -> tuple[list[str], list[str]]:
        """Tool outputs and assistant texts of the messages before index ``before``,
        oldest first (what memory retrieval reads around a new ask)."""
        ...

    def message_count(self, body: Any) -> int: ...

    def turn_end(self, body: Any) -> int:
        """How many messages the conversation's latest turn ends with: ``message_count``
        without trailing system-role messages (Claude Code 2.1.197 sends its first request of
        a session as ``[user ask, system note]``: the ask is still the turn the model answers)."""
        ...

    def user_slot(self, body: Any, index: int) -> TextSlot:
        """Where the content of message ``index`` is (``edits.append_user_tail``)."""
        ...

    def parse_response(self, body: Any) -> AssembledMessage: ...

    def usage(self, raw: Any) -> Usage: ...

    def assembler(self) -> StreamAssembler: ...

    def error_body(self, status: int, message: str) -> bytes: ...

    # -- output shaping ----------------------------------------------------------------------

    def turn_parts(self, body: Any) -> tuple[PartKind, ...]: ...

    def has_tools(self, body: Any) -> bool: ...

    def tool_names(self, body: Any) -> tuple[str, ...]: ...

    def wants_structured_output(self, body: Any) -> bool: ...

    def cache_ttl(self, body: Any) -> float: ...

    def effort_fields(self, body: Any) -> EffortFields: ...

    def param_paths(self, body: Any) -> ParamPaths: ...

    def system_slot(self, body: Any, *, inherits_system: bool = True) -> TextSlot | None:
        """Where ember's block goes at the tail of the system prompt (None: nowhere it could
        go without shifting the client's prefix). ``inherits_system`` False: the request
        continues a response that had no system prompt in its input (only the Responses API
        has continuations)."""
        ...

    def system_texts(self, body: Any) -> list[str]:
        """The texts of the system prompt, in the order ember's block is looked for."""
        ...


class AdapterBase:
    """Reads that every wire format spells the same way."""

    def message_count(self, body: Any) -> int:
        raise NotImplementedError

    def turn_end(self, body: Any) -> int:
        return self.message_count(body)

    def model(self, body: Any) -> str | None:
        return as_str(body.get("model")) if isinstance(body, dict) else None

    def is_stream(self, body: Any) -> bool:
        return isinstance(body, dict) and body.get("stream") is True

    def has_tools(self, body: Any) -> bool:
        return offers_tools(body)

    def tool_names(self, body: Any) -> tuple[str, ...]:
        """Names of the tools offered (Anthropic ``name``, OpenAI Chat ``function.name``,
        Responses ``name``, or a built-in tool's ``type``), sorted."""
        tools = body.get("tools") if isinstance(body, dict) else None
        if not isinstance(tools, list):
            return ()
        names = []
        for t in tools:
            if not isinstance(t, dict):
                continue
            fn = t.get("function")
            name = t.get("name") or (fn.get("name") if isinstance(fn, dict) else None)
            name = name or t.get("type")
            if isinstance(name, str):
                names.append(name)
        return tuple(sorted(names))

    def wants_structured_output(self, body: Any) -> bool:
        """The request asks for an answer in a JSON schema (Anthropic ``output_config.format``,
        Chat ``response_format``, Responses ``text.format``): what a title generator or a
        classifier asks for, never a coding agent's conversation."""
        if not isinstance(body, dict):
            return False
        found = []
        for outer, inner in (("output_config", "format"), ("text", "format")):
            holder = body.get(outer)
            if isinstance(holder, dict):
                found.append(holder.get(inner))
        found.append(body.get("response_format"))
        return any(
            isinstance(f, dict) and f.get("type") in ("json_schema", "json_object") for f in found
        )


def part_kinds(content: Any, table: dict[str, PartKind]) -> tuple[PartKind, ...]:
    """What each part of a user message's content is, by its ``type`` alone."""
    if isinstance(content, str):
        return ("text",)
    if not isinstance(content, list):
        return ()
    return tuple(
        table.get(str(p.get("type")), "other") if isinstance(p, dict) else "other" for p in content
    )

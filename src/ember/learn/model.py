"""The one model every agent's log is normalised into, and what analysis hands to write-back.

Readers (``ember.learn.logs``) turn each agent's own format into :class:`SessionData` holding
:class:`ToolCall` and :class:`SessionEvent` items; loop detection, the digest and the analysis
only ever see this model, never a raw log line. Invariant: a session holds what a person would
need to see the pattern (names, the call's input, whether it failed, how much it returned) and
never a tool's whole output, so a scan of a 2 GB log directory stays small in memory.

:class:`Recommendation` is what the analysis produces and what write-back consumes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ember.errors import EmberError

#: How much of an error text or a prompt a session keeps (enough to recognise it).
SNIPPET_CHARS = 300
#: How many malformed lines a scan keeps the details of (all are counted).
MAX_PROBLEMS_KEPT = 200
#: How many messages a session keeps for ``learn --verbosity`` (later ones are counted, not
#: kept): a session is held whole only while it is folded, and this caps what that costs.
MAX_MESSAGES_KEPT = 20_000

__all__ = [
    "MAX_PROBLEMS_KEPT",
    "SNIPPET_CHARS",
    "LearnError",
    "Message",
    "Problem",
    "Recommendation",
    "ScanStats",
    "SessionData",
    "SessionEvent",
    "ToolCall",
    "Usage",
    "snippet",
]


class LearnError(EmberError):
    """``ember learn`` cannot go on: bad options, no logs, the model call failed (the message
    says which and how to fix it)."""


def snippet(text: str | None, limit: int = SNIPPET_CHARS) -> str | None:
    """``text`` cut to ``limit`` characters (with an ellipsis), None stays None."""
    if text is None:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(slots=True)
class ToolCall:
    """One tool invocation and what came of it.

    ``input`` is the call's arguments as the agent sent them (a dict; a raw string under
    ``"raw"`` when they were not JSON). ``is_error`` is True when the tool reported a failure
    (Claude's ``is_error``, Codex's non-zero ``exit_code``, Gemini's ``error`` status ...);
    ``output_chars`` is the size of what came back, the measure of what a re-fetch wasted.
    """

    name: str
    input: dict[str, Any]
    call_id: str | None = None
    is_error: bool = False
    error: str | None = None
    output_chars: int = 0
    timestamp: str | None = None
    #: the position of the call in its session (0-based), to keep order after merging sources
    index: int = 0


@dataclass(slots=True)
class SessionEvent:
    """Something in a session that is not a tool call: ``kind`` is one of ``user_prompt``,
    ``interrupt``, ``api_error``, ``error``, ``compaction``, ``refusal``; ``text`` a snippet."""

    kind: str
    text: str | None = None
    timestamp: str | None = None


@dataclass(slots=True)
class Message:
    """One message of a session as ``learn --verbosity`` reads it (``verbosity.LogMessage``).

    ``role`` is ``user`` or ``assistant``; ``parts`` the kinds of its content blocks (``text``,
    ``image``, ``tool_use``, ``tool_result``, ``tool_error``); ``text`` a snippet of its visible
    text and ``chars`` that text's full length (how long an answer was, without holding it);
    ``interrupted`` marks a user message that stopped the answer before it. Token counts are
    the API usage of an assistant message (input including cached), None when not logged.
    One assistant message is one API answer, even when the log splits it over several lines.
    """

    role: str
    timestamp: float | None = None
    parts: list[str] = field(default_factory=list)
    text: str = ""
    chars: int = 0
    interrupted: bool = False
    model: str | None = None
    output_tokens: int | None = None
    input_tokens: int | None = None

    def add_text(self, text: str) -> None:
        """Count ``text`` into the message, keeping at most a snippet of it."""
        if not text:
            return
        self.chars += len(text)
        if len(self.text) < SNIPPET_CHARS:
            joined = f"{self.text}\n{text}" if self.text else text
            self.text = snippet(joined) or ""


@dataclass(slots=True)
class Usage:
    """Tokens a session's model calls used, each API message counted once."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens


@dataclass(slots=True)
class SessionData:
    """One agent session (a sub-agent's run is its own session, pointing at its parent)."""

    agent: str
    session_id: str
    source: str
    project: str | None = None
    #: Gemini names a project only by the SHA-256 of its directory
    project_hash: str | None = None
    model: str | None = None
    started: str | None = None
    title: str | None = None
    parent_session_id: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    events: list[SessionEvent] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    messages: int = 0
    #: the messages (for ``learn --verbosity``), from readers whose logs have them
    turns: list[Message] = field(default_factory=list)
    #: messages past :data:`MAX_MESSAGES_KEPT`, counted and not kept
    turns_dropped: int = 0

    def add_message(self, message: Message) -> Message:
        """Keep ``message`` unless the session already holds :data:`MAX_MESSAGES_KEPT`; the
        message is returned either way, so a reader can go on filling it in."""
        if len(self.turns) < MAX_MESSAGES_KEPT:
            self.turns.append(message)
        else:
            self.turns_dropped += 1
        return message

    def add_call(self, call: ToolCall) -> ToolCall:
        call.index = len(self.tool_calls)
        self.tool_calls.append(call)
        return call

    @property
    def is_subagent(self) -> bool:
        return self.parent_session_id is not None


@dataclass(frozen=True, slots=True)
class Problem:
    """A line (or file) that could not be read: where, and why."""

    path: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.reason}"


@dataclass
class ScanStats:
    """What a scan saw. ``records`` counts every record by its type key (``assistant``,
    ``response_item/function_call``, ...); ``unknown`` the subset no reader understood (skipped);
    ``malformed`` every unreadable line, with the first :data:`MAX_PROBLEMS_KEPT` kept in
    ``problems`` so the user can find them."""

    files: int = 0
    bytes: int = 0
    records: Counter[str] = field(default_factory=Counter)
    unknown: Counter[str] = field(default_factory=Counter)
    malformed: int = 0
    problems: list[Problem] = field(default_factory=list)

    def problem(self, path: str, line: int | None, reason: str) -> None:
        self.malformed += 1
        if len(self.problems) < MAX_PROBLEMS_KEPT:
            self.problems.append(Problem(path, line, reason))

    def record(self, key: str, *, known: bool = True) -> None:
        self.records[key] += 1
        if not known:
            self.unknown[key] += 1

    def merge(self, other: ScanStats) -> None:
        self.files += other.files
        self.bytes += other.bytes
        self.records.update(other.records)
        self.unknown.update(other.unknown)
        self.malformed += other.malformed
        room = MAX_PROBLEMS_KEPT - len(self.problems)
        self.problems.extend(other.problems[: max(room, 0)])


@dataclass(slots=True)
class Recommendation:
    """One lesson for an agent's instructions file.

    ``section`` names the heading it belongs under (write-back replaces a section it is given
    whole and keeps the others). ``estimated_tokens_saved`` is the model's guess, unless
    ``is_loop_guardrail``: then it is the waste measured in the logs for the loop it guards
    against (a lower bound), which overrides the guess. ``evidence`` says where it was seen.
    """

    section: str
    text: str
    estimated_tokens_saved: int = 0
    is_loop_guardrail: bool = False
    evidence: list[str] = field(default_factory=list)

    @property
    def weight(self) -> int:
        """The number to rank recommendations by."""
        return self.estimated_tokens_saved

    def to_json(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "text": self.text,
            "estimated_tokens_saved": self.estimated_tokens_saved,
            "is_loop_guardrail": self.is_loop_guardrail,
            "evidence": list(self.evidence),
        }

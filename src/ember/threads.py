"""Which conversation of a session a request belongs to (pure).

One client session carries several conversations. Claude Code sends, under the main session's
id, its title generation, compaction and sub-agents (Explore, ...) with other system prompts
and tools (recorded in ``tests/fixtures/clients``). Features decide per *thread*: shaping and
memory act on the user's own thread (``main``) and leave the others alone — a title request
given a verbosity block or a memory block was a bug; shadow memory forks only from ``main``;
accounting keeps the thread with every row.

A request's thread follows from its shape (``RequestShape``) and what the session has shown so
far (``SessionThreads``):
- the client says it is a sub-agent (Claude Code's ``x-claude-code-agent-id`` header):
  ``subagent``, one thread per first message (its task);
- the system prompt opens as one of the clients' own side requests does (``SIDE_PROMPTS``:
  OpenCode's title generator, Qwen Code's managed-memory extraction, aider's commit message and
  chat summary): ``side``, whatever it offers and whenever it comes;
- no tools while asking for a JSON-schema answer, or no tools while the session's main thread
  has tools: ``side`` (title generation, classifiers, summaries);
- the same system prompt and tools as the main thread (its *lineage*), or the same first
  message (the main thread with a changed system prompt): ``main`` — compaction and the
  conversation that restarts after it included;
- the first thread seen that is not side: ``main``;
- anything else under the session (another system prompt, another first message): a
  ``subagent`` when it has tools, else ``side``.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, replace
from typing import Literal

ThreadKind = Literal["main", "subagent", "side"]

#: How Claude Code (2.1.x) asks for a compaction: appended to the last user message of the main
#: thread. The request is the main thread's, but not an ask of the user's.
_COMPACTION_MARKERS = (
    "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.",
    "Your task is to create a detailed summary of the conversation so far",
)


#: Lines of a system prompt that change with the conversation rather than with the agent:
#: Claude Code 2.1 opens it with a billing header whose ``cc_version`` suffix changes when the
#: conversation restarts (after a compaction), though the agent is the same.
_VOLATILE = "x-anthropic-billing-header:"


#: How the clients' side requests open their system prompt (recorded in
#: ``tests/fixtures/clients``). Their shape alone does not tell them apart: OpenCode sends its
#: title request before the session's first turn, without tools and without a JSON schema, so it
#: became the session's main thread and the real first turn a sub-agent; Qwen Code's managed
#: memory extraction repeats the main thread's history (its first message too) with tools of its
#: own, so it counted as the main thread and got the user's memory block. aider's commit message
#: and chat summary carry no session id: each would be the main thread of a session of its own.
SIDE_PROMPTS = (
    "You are a title generator.",  # OpenCode 1.18 (Anthropic and OpenAI providers)
    "You are now acting as the managed memory extraction subagent",  # Qwen Code 0.15
    "You are an expert software engineer that generates concise, one-line Git commit",  # aider
    "*Briefly* summarize this partial conversation about programming.",  # aider 0.86
)


def is_side_prompt(system: str) -> bool:
    """Whether ``system`` is one of the clients' own side requests (``SIDE_PROMPTS``)."""
    return system.lstrip().startswith(SIDE_PROMPTS)


def stable_system(system: str) -> str:
    """``system`` with every line that starts with the volatile header emptied (its newline
    kept), found with ``str.find``.

    It runs on every request: on Claude Code's 26 KB system prompt the multi-line regex this
    replaces (``(?m)^x-anthropic-billing-header:[^\n]*$``) took ~0.13 ms a request, since it
    tries ``^`` at every character; the search of a literal takes microseconds."""
    at = system.find(_VOLATILE)
    if at < 0:
        return system
    parts: list[str] = []
    start = 0
    while at >= 0:
        if at == 0 or system[at - 1] == "\n":
            end = system.find("\n", at)
            end = len(system) if end < 0 else end
            parts.append(system[start:at])
            start = at = end
        else:
            at += 1
        at = system.find(_VOLATILE, at)
    parts.append(system[start:])
    return "".join(parts)


def digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=64)
def _lineage(system: str, tools: tuple[str, ...]) -> str:
    """The lineage digest, remembered by the prompt's text: an agent sends the same system
    prompt and tools on every request, and hashing Claude Code's 26 KB prompt each time cost
    ~40 us a request (and let the writer thread take the GIL while sha256 ran)."""
    return digest(stable_system(system), ",".join(tools))


@dataclass(frozen=True)
class RequestShape:
    """What of a request decides its thread (digests only: no content is kept)."""

    lineage: str  # system prompt + tool names: one per kind of agent
    opener: str  # the first user message: one per conversation of a lineage
    has_tools: bool
    structured: bool  # asks for a JSON-schema answer
    subagent_marker: bool  # the client says it is a sub-agent
    side_marker: bool = False  # the system prompt is a client's own side request

    @staticmethod
    def of(
        system: str,
        tools: tuple[str, ...],
        first_user: str,
        *,
        structured: bool,
        subagent_marker: bool,
    ) -> RequestShape:
        return RequestShape(
            lineage=_lineage(system, tools),
            opener=digest(first_user),
            has_tools=bool(tools),
            structured=structured,
            subagent_marker=subagent_marker,
            side_marker=is_side_prompt(system),
        )


@dataclass(frozen=True)
class Thread:
    id: str
    kind: ThreadKind

    @property
    def is_main(self) -> bool:
        return self.kind == "main"


@dataclass(frozen=True)
class SessionThreads:
    """What a session has shown of its main thread so far."""

    main_lineage: str | None = None
    main_opener: str | None = None
    main_has_tools: bool = False


def classify(
    session_id: str, shape: RequestShape, state: SessionThreads
) -> tuple[Thread, SessionThreads]:
    """The request's thread, and the session's state after it."""
    if shape.subagent_marker:
        return Thread(f"{session_id}/agent/{shape.opener}", "subagent"), state
    side_like = shape.side_marker or (
        not shape.has_tools
        and (shape.structured or (state.main_has_tools and shape.lineage != state.main_lineage))
    )
    if side_like:
        return Thread(f"{session_id}/side/{shape.lineage}", "side"), state
    same_line = shape.lineage == state.main_lineage or shape.opener == state.main_opener
    if state.main_lineage is None or same_line:
        updated = replace(
            state,
            main_lineage=shape.lineage,
            main_opener=shape.opener,
            main_has_tools=state.main_has_tools or shape.has_tools,
        )
        return Thread(session_id, "main"), updated
    kind: ThreadKind = "subagent" if shape.has_tools else "side"
    prefix = "agent" if shape.has_tools else "side"
    return Thread(f"{session_id}/{prefix}/{shape.opener}", kind), state


def is_compaction(latest_user_text: str) -> bool:
    """A main-thread request that asks the model to summarise the conversation (the answer
    replaces the history): not an ask of the user's, and the end of a generation."""
    return any(marker in latest_user_text for marker in _COMPACTION_MARKERS)

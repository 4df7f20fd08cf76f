"""What the shadow turn asks, how the cold path pages its backlog, and reading the answer (pure).

The hot question is asked by the very context that just spoke: it has the whole conversation
already (in the cached prefix), so the question only has to list the messages not yet read,
each with its id (``m:<id>``) — the prefix carries no database ids, and evidence must cite
real ones. The cold path has no such context: a light model reads rendered pages of the
backlog (``PAGE_TOKENS`` each) with the same instructions.

Answers are a fenced ```json block holding the proposal batch (``CONTRACT.md``): the client's
tools and ``tool_choice`` stay exactly as they were (changing them would invalidate the whole
cached prefix), so the answer cannot come through a tool call — except in library mode, where
the framework offers the resident ``memory_propose`` tool on every turn from the first one
(``ember.shadow.propose``): the tools are unchanged and the answer is a call of it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ember.project import ProjectRef
from ember.protocols.base import AssembledMessage
from ember.protocols.tooling import parse_arguments
from ember.shadow.models import ParsedFact
from ember.store.transcript_rows import Message
from ember.tokens import count_tokens

#: The cold path's page size, in (approximate) tokens.
PAGE_TOKENS = 12_000
#: How much of one message the hot question shows: the model has every message whole in its
#: context already; the line only ties an id to it. Every character here is fresh input at
#: full price (the rest of the run reads from the cache), so the user's words get a little
#: more room than the rest.
HOT_USER_CHARS = 160
HOT_OTHER_CHARS = 60
#: How much of a remembered fact the question shows, and how many facts at most.
KNOWN_CHARS = 200
MAX_KNOWN = 30
#: A remembered fact as the question lists it: (memory id, content).
Remembered = tuple[str, str]
#: What a session's question shows as already remembered: (project, session) -> the facts
#: the session was given and those its earlier runs stored (``ShadowCore._known``).
Known = Callable[[ProjectRef, str], Awaitable[list[Remembered]]]
#: How much of one message a cold page shows: the user's words whole, the rest shortened.
COLD_USER_CHARS = 4_000
COLD_OTHER_CHARS = 1_200

_CLIENT_CONTEXT = re.compile(
    r"<(system-reminder|environment_context)>.*?</\1>", re.DOTALL | re.IGNORECASE
)
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n?```", re.DOTALL)

_FACT_RULES = """Propose only durable facts worth remembering in later sessions of this project: \
decisions, conventions, preferences, how things are built, run or deployed, and lessons from \
what failed. Not: questions, plans that were not confirmed, chit-chat, or anything secret \
(keys, passwords, tokens). When the conversation changed a fact (a correction, a new value), \
propose only the fact as it stands now.
Every fact needs evidence, pointing at the messages listed below by their id:
- "user-stated": a message in which the user stated it (a question is not a decision);
- "user-accepted": the user's message explicitly accepting it (silence is not acceptance);
- "tool-verified": a successful tool result that shows it;
- "observed-outcome": a successful tool result, or {"kind": "observed-outcome", "sessionId": \
"<session>"} for what this whole session demonstrably did.
"""

_FENCED = """Answer with one fenced json block and nothing else:
```json
{"facts": [{"content": "...", "category": "convention", "evidence": [{"kind": "user-stated", \
"messageId": "m..."}]}]}
```
If nothing is worth keeping, answer ```json
{"facts": []}
```"""

RULES = _FACT_RULES + _FENCED


def tool_rules(tool: str) -> str:
    """The rules when the answer goes through the resident ``tool`` (library mode)."""
    return (
        f"{_FACT_RULES}Answer by calling the {tool} tool once, with "
        '{"facts": [{"content": "...", "category": "convention", "evidence": [{"kind": '
        '"user-stated", "messageId": "m..."}]}]} as its input ({"facts": []} if nothing is '
        "worth keeping). Call no other tool."
    )


HOT_HEADER = """[ember shadow turn] This is not a message from the user. The conversation \
above is paused; do not continue it, do not call any tool. Read back over it and propose the \
facts worth remembering.
"""
#: The header when the answer goes through the resident propose tool (library mode).
HOT_HEADER_TOOL = """[ember shadow turn] This is not a message from the user. The conversation \
above is paused; do not continue it, and call no tool but {tool}. Read back over it and propose \
the facts worth remembering.
"""

COLD_SYSTEM = """You read excerpts of a coding agent's session and extract the facts worth \
remembering for later sessions of the same project. Each message is listed as \
"m:<id> <role>: <text>"; long messages are shortened.
"""


def _clean(text: str) -> str:
    return " ".join(_CLIENT_CONTEXT.sub(" ", text).split())


def render_line(m: Message, limit: int) -> str:
    text = _clean(m.content)
    if len(text) > limit:
        text = text[:limit] + " …"
    return f"m:{m.id} {m.kind}: {text}"


def remembered_block(known: Sequence[Remembered]) -> str:
    """The facts already remembered, each with its id, and how to correct one: a fact that
    changed must name what it replaces, or the stale version stays current and is injected
    beside the new one ("" when nothing is known)."""
    if not known:
        return ""
    lines = [f"- [{memory_id}] {_clean(text)[:KNOWN_CHARS]}" for memory_id, text in known]
    return (
        "Already remembered (given to this session, or stored from it earlier), by id:\n"
        + "\n".join(lines)
        + '\nIf a fact you propose corrects or replaces one of these, add "supersedes": '
        '["<id>"] to it. Do not propose again what is remembered unchanged.\n\n'
    )


def hot_question(
    messages: Sequence[Message],
    session_id: str,
    tool: str | None = None,
    known: Sequence[Remembered] = (),
) -> str:
    """The question appended to the recorded request (``messages``: the unread ones); with
    ``tool`` (a resident tool of the request, library mode) the answer is a call of it;
    ``known``: the facts already remembered, which a new one may supersede."""
    lines = [
        render_line(m, HOT_USER_CHARS if m.kind == "user" else HOT_OTHER_CHARS) for m in messages
    ]
    header = HOT_HEADER if tool is None else HOT_HEADER_TOOL.format(tool=tool)
    rules = RULES if tool is None else tool_rules(tool)
    return (
        f"{header}\n{rules}\nThis session's id (for observed-outcome): {session_id}\n\n"
        + remembered_block(known)
        + "Messages not yet read, oldest first:\n"
        + "\n".join(lines)
    )


def cold_pages(messages: Sequence[Message], page_tokens: int = PAGE_TOKENS) -> list[list[str]]:
    """The backlog rendered and cut into pages of about ``page_tokens`` each (a line never
    straddles two pages; a single line longer than a page gets a page of its own)."""
    pages: list[list[str]] = []
    current: list[str] = []
    used = 0
    for m in messages:
        limit = COLD_USER_CHARS if m.kind == "user" else COLD_OTHER_CHARS
        line = render_line(m, limit)
        cost = count_tokens(line) + 1
        if current and used + cost > page_tokens:
            pages.append(current)
            current, used = [], 0
        current.append(line)
        used += cost
    if current:
        pages.append(current)
    return pages


def cold_prompt(
    page: Sequence[str], session_id: str, known: Sequence[Remembered] = ()
) -> tuple[str, str]:
    """(system, user) for one cold page; ``known`` as for ``hot_question``."""
    user = (
        f"{RULES}\nThis session's id (for observed-outcome): {session_id}\n\n"
        + remembered_block(known)
        + "Messages:\n"
        + "\n".join(page)
    )
    return COLD_SYSTEM, user


def shown_supersedes(facts: Sequence[ParsedFact], known: Sequence[Remembered]) -> list[ParsedFact]:
    """The facts with their ``supersedes`` cut to ids the question showed: a model may only
    end a memory it was shown (an id it made up, or one of another session's, names nothing
    it saw). The fact itself is kept either way."""
    shown = {memory_id for memory_id, _ in known}
    out = []
    for f in facts:
        fact = f.fact
        named = fact.supersedes if fact is not None else None
        if fact is not None and named and any(i not in shown for i in named):
            kept = [i for i in named if i in shown] or None
            f = dataclasses.replace(f, fact=fact.model_copy(update={"supersedes": kept}))
        out.append(f)
    return out


def parse_answer(text: str) -> Any:
    """The JSON of the answer's fenced block (the last one that parses). Raises
    ``ValueError`` saying what was wrong when there is none."""
    blocks = _FENCE.findall(text)
    if not blocks:
        stripped = text.strip()
        if stripped.startswith("{"):
            blocks = [stripped]
        else:
            raise ValueError("the answer has no fenced json block")
    last_error: Exception | None = None
    for block in reversed(blocks):
        try:
            return json.loads(block)
        except json.JSONDecodeError as exc:
            last_error = exc
    raise ValueError(f"the answer's json block does not parse: {last_error}")


def answer_batch(answer: AssembledMessage, tool: str | None = None) -> Any:
    """The proposal batch of a shadow answer: the input of its ``tool`` calls (their facts
    together, library mode), else the fenced json block of its text. Calls of any other tool
    are never taken (a shadow turn runs no tool). Raises ``ValueError`` saying what was wrong
    when there is no batch."""
    calls = [b for b in answer.tool_calls if tool is not None and b.name == tool]
    if not calls:
        return parse_answer(answer.text)
    facts: list[Any] = []
    for call in calls:
        batch = parse_arguments(call.input)
        found = batch.get("facts") if isinstance(batch, dict) else None
        if not isinstance(found, list):
            raise ValueError(f'the {tool} call\'s input is not {{"facts": [...]}}')
        facts.extend(found)
    return {"facts": facts}

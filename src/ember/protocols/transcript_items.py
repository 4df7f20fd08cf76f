"""A conversation as protocol-neutral transcript items (``base.TranscriptItem``).

The transcript is what shadow memory lists in its question and what evidence points at, so an
item must say who spoke and what kind of thing it is by structure alone: the user's own words,
the assistant's text and calls, a tool's result or error.

Decisions:
- System and developer messages (Chat) and items (Responses) are the prompt, not the
  conversation: no items.
- Client context inside a user message (Claude Code's ``<system-reminder>`` blocks, Codex's
  ``<environment_context>`` and ``AGENTS.md`` instructions, Gemini CLI's
  ``<session_context>``) is not the user's words: it is
  taken out, and a message that held nothing else yields no user item. Otherwise a reminder
  would be cited as something the user stated.
- A user message holding both tool results and text (Claude Code sends reminders, and text the
  user typed while tools ran, beside the results) yields one ``tool`` item per result, at its
  block index, and then one ``user`` item with the remaining text, at the index of its first
  text block. The results stay evidence of what the tools returned; the text stays the
  user's. A Gemini content is read the same way, part by part.
- Thinking and Responses reasoning items are private to the model: no items. A tool call is a
  ``called name(args)`` line of its assistant item, arguments truncated.
- ``answer_items`` builds the items from the answer *as replayed* (``replay``), so they are the
  very items ``transcript_items`` gives for the same messages when the client resends them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any, Protocol

from ember.protocols import gemini_parts as gp
from ember.protocols.base import AssembledMessage, ProtocolAdapter, TranscriptItem, TranscriptKind
from ember.protocols.calls import WALKS, NamesBefore, conversation
from ember.protocols.content import structured_error, text_of
from ember.protocols.jsonedit import dumps
from ember.protocols.replay import REPLAYS

#: Not the user's words: the client's context blocks, and ember's own memory block (recorded
#: as the user's, a remembered fact would come back as "user-stated" evidence for itself).
_CLIENT_CONTEXT = re.compile(
    r"<(system-reminder|environment_context|session_context|ember-memory)>.*?</\1>"
    r"|#[ \t]*AGENTS\.md instructions for [^\n]*\s*<INSTRUCTIONS>.*?</INSTRUCTIONS>",
    re.DOTALL | re.IGNORECASE,
)
_TEXT_PARTS = ("text", "input_text", "output_text")
_SYSTEM_ROLES = ("system", "developer")

#: Characters of a call's arguments shown in its ``called name(args)`` line.
ARGS_LIMIT = 200

Items = list[TranscriptItem]


def own_words(text: str) -> str:
    """``text`` without the client's context blocks, stripped."""
    return _CLIENT_CONTEXT.sub("", text).strip()


def call_line(name: Any, args: Any) -> str:
    shown = args if isinstance(args, str) else dumps(args)
    if len(shown) > ARGS_LIMIT:
        shown = shown[: ARGS_LIMIT - 1] + "…"
    return f"called {name if isinstance(name, str) else '?'}({shown})"


def _user(position: int, part: int, text: str) -> Items:
    words = own_words(text)
    return [TranscriptItem(position, part, "user", "user", words)] if words else []


def _assistant(position: int, texts: list[str], calls: list[tuple[str, str]]) -> Items:
    """``calls``: (id, line). No item when the message has neither text nor calls."""
    lines = [t for t in texts if t.strip()] + [line for _, line in calls]
    if not lines:
        return []
    ids = tuple(i for i, _ in calls if i)
    return [TranscriptItem(position, 0, "assistant", "assistant", "\n".join(lines), ids)]


def _tool(position: int, part: int, text: str, error: bool, call_id: Any, name: Any) -> Items:
    kind: TranscriptKind = "tool_error" if error else "tool_result"
    ids = (call_id,) if isinstance(call_id, str) else ()
    tool = name if isinstance(name, str) else None
    return [TranscriptItem(position, part, "tool", kind, text, ids, tool)]


# -- Anthropic ------------------------------------------------------------------------------


def _anthropic_assistant(position: int, content: Any, names: dict[str, str]) -> Items:
    if isinstance(content, str):
        return _assistant(position, [content], [])
    texts: list[str] = []
    calls: list[tuple[str, str]] = []
    for b in content if isinstance(content, list) else []:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text" and isinstance(b.get("text"), str):
            texts.append(b["text"])
        elif isinstance(kind, str) and kind.endswith("tool_use"):  # also server/mcp tool use
            call_id = b.get("id")
            if isinstance(call_id, str) and isinstance(b.get("name"), str):
                names[call_id] = b["name"]
            calls.append(
                (
                    call_id if isinstance(call_id, str) else "",
                    call_line(b.get("name"), b.get("input")),
                )
            )
    return _assistant(position, texts, calls)


def _anthropic_user(position: int, content: Any, names: dict[str, str]) -> Items:
    if isinstance(content, str):
        return _user(position, 0, content)
    out: Items = []
    texts: list[tuple[int, str]] = []
    for i, b in enumerate(content if isinstance(content, list) else []):
        if not isinstance(b, dict):
            continue
        if b.get("type") == "tool_result":
            call_id = b.get("tool_use_id")
            text = text_of(b.get("content"))
            out += _tool(
                position, i, text, b.get("is_error") is True, call_id, names.get(str(call_id))
            )
        elif b.get("type") == "text" and isinstance(b.get("text"), str) and own_words(b["text"]):
            texts.append((i, b["text"]))
    if texts:
        out += _user(position, texts[0][0], "\n\n".join(t for _, t in texts))
    return out


def _anthropic_items(messages: list[Any], start: int, names: dict[str, str]) -> Items:
    out: Items = []
    for offset, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        if m.get("role") == "assistant":
            out += _anthropic_assistant(start + offset, m.get("content"), names)
        elif m.get("role") == "user":
            out += _anthropic_user(start + offset, m.get("content"), names)
    return out


# -- OpenAI Chat Completions ----------------------------------------------------------------


def _chat_assistant(position: int, m: dict[str, Any], names: dict[str, str]) -> Items:
    calls: list[tuple[str, str]] = []
    for call in m.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            continue
        call_id = call.get("id")
        if isinstance(call_id, str) and isinstance(fn.get("name"), str):
            names[call_id] = fn["name"]
        calls.append(
            (
                call_id if isinstance(call_id, str) else "",
                call_line(fn.get("name"), fn.get("arguments")),
            )
        )
    return _assistant(position, [text_of(m.get("content"), _TEXT_PARTS)], calls)


def _chat_items(messages: list[Any], start: int, names: dict[str, str]) -> Items:
    out: Items = []
    for offset, m in enumerate(messages):
        position = start + offset
        role = m.get("role") if isinstance(m, dict) else None
        if not isinstance(m, dict) or role in _SYSTEM_ROLES:
            continue
        text = text_of(m.get("content"), _TEXT_PARTS)
        if role == "user":
            out += _user(position, 0, text)
        elif role == "assistant":
            out += _chat_assistant(position, m, names)
        elif role in ("tool", "function"):
            call_id = m.get("tool_call_id")
            name = names.get(str(call_id)) or m.get("name")
            out += _tool(position, 0, text, structured_error(text), call_id, name)
    return out


# -- OpenAI Responses -----------------------------------------------------------------------


def _output_text(output: Any) -> str:
    return output if isinstance(output, str) else text_of(output, _TEXT_PARTS)


def _responses_item(position: int, item: dict[str, Any], names: dict[str, str]) -> Items:
    kind, role = item.get("type"), item.get("role")
    if kind in (None, "message") and role == "user":
        return _user(position, 0, text_of(item.get("content"), _TEXT_PARTS))
    if kind in (None, "message") and role == "assistant":
        return _assistant(position, [text_of(item.get("content"), _TEXT_PARTS)], [])
    if not isinstance(kind, str) or "call_id" not in item:
        return []  # the prompt, reasoning, server-side items
    call_id = item.get("call_id")
    if kind.endswith("_call_output"):
        text = _output_text(item.get("output"))
        name = names.get(str(call_id))
        return _tool(position, 0, text, structured_error(text), call_id, name)
    if kind.endswith("_call"):
        name = item.get("name") or kind.removesuffix("_call")
        names[str(call_id)] = name
        args = next((item[k] for k in ("arguments", "input", "action") if k in item), "")
        return _assistant(position, [], [(str(call_id), call_line(name, args))])
    return []


def _responses_items(items: list[Any], start: int, names: dict[str, str]) -> Items:
    out: Items = []
    for offset, item in enumerate(items):
        if isinstance(item, dict):
            out += _responses_item(start + offset, item, names)
    return out


# -- Gemini ---------------------------------------------------------------------------------


def _gemini_model(position: int, content: Any) -> Items:
    texts = [t for p in gp.parts(content) if (t := gp.visible_text(p)) is not None]
    calls = [(key, call_line(name, call.get("args"))) for key, name, call in gp.call_keys(content)]
    return _assistant(position, texts, calls)


def _gemini_user(position: int, previous: Any, content: Any) -> Items:
    out: Items = []
    for j, key, name, response in gp.responses(previous, content):
        text = gp.response_text(response)
        out += _tool(position, j, text, gp.response_failed(response), key, name)
    texts = [
        (j, t)
        for j, p in enumerate(gp.parts(content))
        if (t := gp.visible_text(p)) is not None and own_words(t)
    ]
    if texts:
        out += _user(position, texts[0][0], "\n\n".join(t for _, t in texts))
    return out


def _gemini_items(contents: list[Any], start: int, names: dict[str, str]) -> Items:
    """Each content read with the one before it (a function response is keyed by the call it
    answers there); a slice's first content has its previous one only when the slice starts
    the conversation, else its responses keep their own ids (their names are their own)."""
    out: Items = []
    for offset, c in enumerate(contents):
        if not isinstance(c, dict):
            continue
        previous = contents[offset - 1] if offset > 0 else None
        if gp.is_model(c):
            out += _gemini_model(start + offset, c)
        elif gp.role(c) in gp.USER_ROLES:
            out += _gemini_user(start + offset, previous, c)
    return out


#: Wire formats whose content is read with the one before it (``_gemini_items``).
_READ_WITH_PREVIOUS = frozenset({"gemini"})

_ITEMS: dict[str, Callable[[list[Any], int, dict[str, str]], Items]] = {
    "anthropic": _anthropic_items,
    "openai_chat": _chat_items,
    "openai_responses": _responses_items,
    "gemini": _gemini_items,
}


class Said(Protocol):
    """Anything that says something in a conversation (a transcript item, a stored row)."""

    @property
    def role(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def text(self) -> str: ...


def item_digest(item: Said) -> str:
    """What a message says, as a digest of its role, kind and text: the same words said in
    another session (a resumed or forked conversation) digest the same. The transcript keeps
    it per row, and memory compares it to tell a fact already in a conversation's context."""
    return hashlib.sha256(f"{item.role}\0{item.kind}\0{item.text}".encode()).hexdigest()[:24]


def transcript_items(
    adapter: ProtocolAdapter, body: Any, from_position: int = 0
) -> list[TranscriptItem]:
    """The conversation of ``body`` as transcript items, in order (see the module's
    decisions); ``[]`` for a body that has none or is not an object.

    ``from_position``: only the items of the first message and of the messages from that
    position on (the ones before it only lend their tool names to later results). A caller
    that has recorded the thread up to there needs no more, and reading a 200 KiB history
    whole on every request of a long session was the largest cost ember added to it. The
    items it returns are exactly the full call's items at those positions.
    """
    items, walk = _ITEMS.get(adapter.name), WALKS.get(adapter.name)
    if items is None or walk is None:
        return []
    messages = conversation(adapter, body)
    names: dict[str, str] = {}
    if from_position <= 1:
        return items(messages, 0, names)
    head = items(messages[:1], 0, names)
    later = NamesBefore(walk, messages[1:from_position], fallback=names)
    if adapter.name in _READ_WITH_PREVIOUS:  # read from the content before, which is dropped
        tail = items(messages[from_position - 1 :], from_position - 1, later)
        return head + [item for item in tail if item.position >= from_position]
    return head + items(messages[from_position:], from_position, later)


def answer_items(
    adapter: ProtocolAdapter, answer: AssembledMessage, position: int
) -> list[TranscriptItem]:
    """The answer as transcript items, numbered from ``position`` (the number of messages of
    the request it answers, where the client will put it when it resends the history).

    One item on Anthropic and Chat (one assistant message); on Responses one per output item
    that is transcript (a message, a tool call), at the item's own position, as the next
    request's input will hold them. ``[]`` when the answer has no text and no calls.
    """
    replay, items = REPLAYS.get(adapter.name), _ITEMS.get(adapter.name)
    if replay is None or items is None:
        return []
    return items(replay.turn(answer), position, {})

"""Tool outputs in a request, whatever the wire format, and where each one's value lives.

A tool's output is the biggest thing an agent's conversation carries (a test log, an API's
JSON, a file tree), and the one thing ember may shorten. To do that byte-safely a feature
needs, for each output: the message it is in, the call it answers (and that call's tool and
arguments), its text when it is all text, and the JSON path of its value, so an edit replaces
that value and nothing around it (an Anthropic ``tool_result``'s ``cache_control`` and
``is_error`` stay where the client put them).

- Anthropic: ``tool_result`` blocks of user messages; ``content`` a string or a list of
  blocks (text only counts as text: an image or a document makes it ``text=None``).
- OpenAI Chat: ``role: "tool"`` messages; ``content`` a string or text parts.
- OpenAI Responses: ``function_call_output`` (and ``custom_tool_call_output``) items;
  ``output`` a string or a list of ``input_text`` parts.
- Gemini: ``functionResponse`` parts of user contents; ``response`` an object, whose
  ``output`` (or ``error``...) string is the text (``gemini_parts.output_of``): any other
  object is not text.

``live_outputs`` are the outputs that reach the provider for the first time in this request:
those after the conversation's last assistant turn (its own calls' results). Everything
before was sent already, as history, and must keep the bytes it had (``outputs_in`` finds an
earlier output again, by its message, to put back what was sent then).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ember.protocols import gemini_parts as gp
from ember.protocols.base import ProtocolAdapter
from ember.protocols.calls import Call, conversation, tool_calls_of

_TEXT_PARTS = ("text", "input_text", "output_text")


@dataclass(frozen=True)
class ToolOutput:
    """One tool output of a request: in message ``message`` (the adapter's index into the
    conversation), answering ``call_id`` with ``tool`` and its ``arguments`` when the
    conversation holds the call; ``text``: its text when it is text only, else None;
    ``path``: the JSON path of its value in the body; ``live``: new in this request."""

    message: int
    call_id: str | None
    tool: str | None
    arguments: dict[str, Any]
    text: str | None
    path: tuple[str | int, ...]
    is_error: bool
    live: bool


def live_outputs(adapter: ProtocolAdapter, body: Any) -> list[ToolOutput]:
    """The tool outputs that reach the provider for the first time in this request: those
    after the conversation's last assistant turn, with their calls' tools and arguments.
    Reads the tail only (a long session's history is not walked on every request)."""
    messages = conversation(adapter, body)
    last = len(messages) - 1
    while last >= 0 and not _said_by_model(messages[last]):
        last -= 1
    calls = tool_calls_of(adapter, messages[last : last + 1]) if last >= 0 else {}
    return [
        _output(adapter, i, sub, call_id, value, is_error, calls, live=True)
        for i, sub, call_id, value, is_error in _walk(adapter.name, messages, last + 1)
    ]


def outputs_in(adapter: ProtocolAdapter, body: Any, message: int) -> list[ToolOutput]:
    """The tool outputs of one message (its calls not looked up: ``tool`` is None)."""
    messages = conversation(adapter, body)
    if not 0 <= message < len(messages):
        return []
    found = _walk(adapter.name, messages, message, message + 1)
    return [
        _output(adapter, message, sub, call_id, value, is_error, {}, live=False)
        for _, sub, call_id, value, is_error in found
    ]


def _output(
    adapter: ProtocolAdapter,
    index: int,
    sub: tuple[str | int, ...],
    call_id: str | None,
    value: Any,
    is_error: bool,
    calls: dict[str, Call],
    *,
    live: bool,
) -> ToolOutput:
    call = calls.get(call_id) if call_id is not None else None
    top = _TOP.get(adapter.name, "messages")
    return ToolOutput(
        message=index,
        call_id=call_id,
        tool=call.name if call is not None else None,
        arguments=call.arguments if call is not None else {},
        text=_text(value),
        path=(top, index, *sub),
        is_error=is_error,
        live=live,
    )


#: The key of the conversation in a body, where it is not ``messages``.
_TOP = {"openai_responses": "input", "gemini": "contents"}


def opens_conversation(adapter: ProtocolAdapter, body: Any) -> bool:
    """Whether ``body`` is the first request of its conversation: nothing in it was said by
    the model, and it continues no stored response (Responses' ``previous_response_id`` or
    ``conversation``: the history is the provider's, not in the body)."""
    if isinstance(body, dict) and (body.get("previous_response_id") or body.get("conversation")):
        return False
    return not any(_said_by_model(m) for m in conversation(adapter, body))


def _said_by_model(m: Any) -> bool:
    """A message (or Responses item) the model produced: an assistant message (Gemini's
    role ``model``), a call."""
    if not isinstance(m, dict):
        return False
    kind = m.get("type")
    if isinstance(kind, str) and (kind.endswith("_call") or kind == "reasoning"):
        return True
    return m.get("role") in ("assistant", "model")


Found = tuple[int, tuple[str | int, ...], str | None, Any, bool]


def _walk(
    protocol: str, messages: list[Any], start: int, stop: int | None = None
) -> Iterator[Found]:
    """(message index, path inside the message, call id, value, is_error) per output of the
    messages from ``start`` to ``stop`` (the end when None)."""
    for i in range(start, len(messages) if stop is None else min(stop, len(messages))):
        m = messages[i]
        if not isinstance(m, dict):
            continue
        if protocol == "gemini":
            yield from _gemini_outputs(messages, i)
        elif protocol == "anthropic":
            content = m.get("content") if m.get("role") == "user" else None
            for j, b in enumerate(content if isinstance(content, list) else []):
                if isinstance(b, dict) and b.get("type") == "tool_result" and "content" in b:
                    yield (
                        i,
                        ("content", j, "content"),
                        _id(b.get("tool_use_id")),
                        b["content"],
                        bool(b.get("is_error")),
                    )
        elif protocol == "openai_chat":
            if m.get("role") == "tool" and "content" in m:
                yield i, ("content",), _id(m.get("tool_call_id")), m["content"], False
        elif protocol == "openai_responses":
            kind = m.get("type")
            if isinstance(kind, str) and kind.endswith("_call_output") and "output" in m:
                yield i, ("output",), _id(m.get("call_id")), m["output"], False


def _gemini_outputs(contents: list[Any], i: int) -> Iterator[Found]:
    """A user content's function responses, each keyed as the call it answers in the content
    before (``gemini_parts.responses``), so an output is the same one whether the request
    is read whole or one content at a time."""
    content = contents[i]
    if gp.role(content) not in gp.USER_ROLES:
        return
    previous = contents[i - 1] if i > 0 else None
    items = gp.parts(content)
    for j, key, _, response in gp.responses(previous, content):
        name = gp.field_key(items[j], "functionResponse", "function_response")
        inner, text = gp.output_of(response)
        failed = gp.response_failed(response)
        if inner is None:
            yield i, ("parts", j, name, "response"), key, response, failed
        else:
            yield i, ("parts", j, name, "response", inner), key, text, failed


def _id(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _text(value: Any) -> str | None:
    """The output's text when it is nothing but text (a string, or text parts only)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not value:
        return None
    texts = []
    for part in value:
        if not isinstance(part, dict) or part.get("type") not in _TEXT_PARTS:
            return None
        text = part.get("text")
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "\n".join(texts)

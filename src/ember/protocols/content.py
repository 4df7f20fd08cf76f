"""Reading the content of requests and answers the same way in every wire format: usage
counters and name fields as the types ember keeps, a message's text, the first words of a
session, ember's own marked regions inside a text (found, and replaced in place), and
whether a tool's output says it failed by a structured field.

Every function here is pure and never raises on what a client or provider sent: a field of
an unexpected type reads as absent (a number where a model name belongs is no model), so a
malformed request is forwarded untouched instead of failing inside ember.
"""

from __future__ import annotations

from typing import Any

import orjson

from ember.protocols.jsonedit import JsonDoc


def as_int(value: Any) -> int:
    """A usage counter as an int; providers send null or omit counters they do not track."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def as_str(value: Any) -> str | None:
    """A name field (model, id) as a string; anything else a client or provider sends there --
    a number, an object, null -- is ``None``, so pricing and accounting never see it."""
    return value if isinstance(value, str) else None


#: How clients open a first user message that holds their own context, not the user's words:
#: Qwen Code 0.15 sends the date, the OS, its working directory and the folder tree there
#: (then an assistant "Got it. Thanks for the context!", then the ask). As the first words of
#: a session it made every session begun in a directory on one day the same session.
CLIENT_CONTEXT_OPENINGS = ("This is the Qwen Code. We are setting up the context for our chat.",)


def first_words(texts: Any) -> str | None:
    """The first of ``texts`` (each user message's text, in order) that is not a client's
    context message (``CLIENT_CONTEXT_OPENINGS``); the first one when all of them are."""
    first: str | None = None
    for text in texts:
        if first is None:
            first = text
        if not text.lstrip().startswith(CLIENT_CONTEXT_OPENINGS):
            return str(text)
    return first


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


def offers_tools(body: Any) -> bool:
    """Whether the request offers the model any tools (``tools`` is a non-empty list in all
    three wire formats)."""
    tools = body.get("tools") if isinstance(body, dict) else None
    return isinstance(tools, list) and bool(tools)


def find_region(text: str, open_tag: str, close_tag: str) -> tuple[int, int] | None:
    """The span of the *last* ``open_tag ... close_tag`` region in ``text``, or None.

    The last one, because ember appends its region at the end: a client text that happens to
    contain a stray open tag earlier must never be swallowed into ember's region.
    """
    start = text.rfind(open_tag)
    if start < 0:
        return None
    end = text.find(close_tag, start + len(open_tag))
    return None if end < 0 else (start, end + len(close_tag))


def with_region(text: str, open_tag: str, close_tag: str, block: str) -> str:
    """``text`` with ember's region replaced by ``block``, or ``block`` appended after a blank
    line. Idempotent: applying it to its own result returns that result unchanged."""
    span = find_region(text, open_tag, close_tag)
    if span is not None:
        return text[: span[0]] + block + text[span[1] :]
    return f"{text}\n\n{block}" if text else block


def replace_region(
    doc: JsonDoc,
    path: list[str | int],
    text: str,
    open_tag: str,
    close_tag: str,
    block: str,
) -> bool:
    """Set the string at ``path`` (currently ``text``) to ``with_region(text, ...)``; no edit at
    all when that changes nothing, so a body shaped twice keeps the first shaping's bytes."""
    new = with_region(text, open_tag, close_tag, block)
    if new == text:
        return False
    doc.replace(path, new)
    return True


#: Tool outputs longer than this are not parsed for structured error fields (bounded work).
_MAX_SNIFF_CHARS = 256 * 1024


def _error_fields(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    code = value.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return True
    return (
        value.get("success") is False or bool(value.get("error")) or value.get("is_error") is True
    )


def structured_error(output: Any) -> bool:
    """Whether a tool output reports failure *in structured fields*: a JSON object (or a string
    holding one) with ``exit_code != 0``, ``success: false``, a truthy ``error`` or
    ``is_error: true`` -- at the top level or under ``metadata``, as Codex reports exit codes.

    Formats without an ``is_error`` flag (OpenAI tool messages and ``*_call_output`` items)
    need this to tell a failing test run from a clean one; prose is never read, so the same
    output always classifies the same way whatever its wording.
    """
    if isinstance(output, str):
        stripped = output.lstrip()
        if not stripped.startswith("{") or len(stripped) > _MAX_SNIFF_CHARS:
            return False
        try:
            output = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            return False
    if not isinstance(output, dict):
        return False
    return _error_fields(output) or _error_fields(output.get("metadata"))

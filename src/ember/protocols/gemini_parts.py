"""Reading Gemini's ``contents``: roles, parts, function calls and their responses (pure).

A Gemini conversation is ``contents``: each a role (``user``, ``model``; an older request may
say ``function`` for a turn of function responses, and a one-shot request may leave the role
out, which the API reads as ``user``) and a list of ``parts``. A part is one of ``text``
(``thought: true`` marks the model's thinking), ``inlineData`` / ``fileData`` (an image, a
PDF...), ``functionCall`` (``name``, ``args``, an optional ``id``) or ``functionResponse``
(``name``, ``response`` -- an object --, an optional ``id``). The REST API takes both spellings
of a field, ``functionCall`` and ``function_call``: every read here accepts both.

A function call's ``id`` is optional, and clients do not agree on it: the API matches a
response to its call by name and order within the turn, and Gemini CLI answers a call the
model gave no id with an id of its own. So a call's *key* is its ``id`` when it has one, else
``name#k`` (the k-th call of that name in its turn), and a response takes the key of the call
it answers: the call with its ``id``, else the k-th call of its name in the turn before. A
response is thus tied to its call (and the call's tool and arguments) whichever way the client
numbered them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ember.protocols.content import structured_error
from ember.protocols.jsonedit import dumps

#: Gemini CLI's context block, which opens a session's first user content: the date, the
#: system, the workspace and its file tree -- the same for every session begun in a directory
#: on one day, and never the user's words.
SESSION_CONTEXT = re.compile(r"<session_context>.*?</session_context>", re.DOTALL)
#: The roles a user-side turn has: an ask, or the results of the model's calls.
USER_ROLES = ("user", "function")
#: Keys of a function response's ``response`` that hold its output as a string, in the order
#: they are looked for (Gemini CLI sends ``{"output": ...}`` or ``{"error": ...}``).
OUTPUT_KEYS = ("output", "error", "content", "result")


def field(value: Any, camel: str, snake: str) -> Any:
    """``value[camel]``, else ``value[snake]`` (the REST API takes both spellings)."""
    if not isinstance(value, dict):
        return None
    found = value.get(camel)
    return found if found is not None else value.get(snake)


def field_key(value: Any, camel: str, snake: str) -> str:
    """The spelling ``value`` uses for a field (camelCase when it has neither)."""
    return snake if isinstance(value, dict) and camel not in value and snake in value else camel


def contents(body: Any) -> list[Any]:
    found = body.get("contents") if isinstance(body, dict) else None
    return found if isinstance(found, list) else []


def role(content: Any) -> str:
    """The role of a content; an absent role is the user's, as the API reads it."""
    value = content.get("role") if isinstance(content, dict) else None
    return value if isinstance(value, str) and value else "user"


def is_model(content: Any) -> bool:
    return isinstance(content, dict) and role(content) == "model"


def parts(content: Any) -> list[Any]:
    found = content.get("parts") if isinstance(content, dict) else None
    return found if isinstance(found, list) else []


def call_of(part: Any) -> dict[str, Any] | None:
    found = field(part, "functionCall", "function_call")
    return found if isinstance(found, dict) else None


def response_of(part: Any) -> dict[str, Any] | None:
    found = field(part, "functionResponse", "function_response")
    return found if isinstance(found, dict) else None


def is_thought(part: Any) -> bool:
    return isinstance(part, dict) and part.get("thought") is True


def visible_text(part: Any) -> str | None:
    """The text of a text part that is not thinking; None for any other part."""
    if not isinstance(part, dict) or is_thought(part):
        return None
    text = part.get("text")
    return text if isinstance(text, str) else None


def text_of(value: Any) -> str:
    """The visible text of a content (or of a list of parts, or a bare string), parts joined
    by newlines; thinking, calls, responses and media are not text."""
    if isinstance(value, str):
        return value
    items = value if isinstance(value, list) else parts(value)
    texts = [t for p in items if (t := visible_text(p)) is not None]
    return "\n".join(texts)


def has_ask(content: Any) -> bool:
    """A user-side content holding something besides function responses (a new ask): one of
    responses alone continues the model's turn."""
    items = parts(content)
    return role(content) == "user" and any(response_of(p) is None for p in items)


def call_keys(content: Any) -> list[tuple[str, str, Any]]:
    """(key, name, args) of each function call of a model content, in order."""
    out: list[tuple[str, str, Any]] = []
    seen: dict[str, int] = {}
    for part in parts(content):
        call = call_of(part)
        name = call.get("name") if call is not None else None
        if call is None or not isinstance(name, str):
            continue
        k = seen.get(name, 0)
        seen[name] = k + 1
        given = call.get("id")
        out.append((given if isinstance(given, str) and given else f"{name}#{k}", name, call))
    return out


def responses(previous: Any, content: Any) -> Iterator[tuple[int, str, str, Any]]:
    """(part index, key, name, response) of each function response of ``content``, keyed as
    the call it answers in ``previous`` (the model turn before it; None when unknown)."""
    calls = call_keys(previous) if is_model(previous) else []
    keys = {key for key, _, _ in calls}
    by_name: dict[str, list[str]] = {}
    for called, called_name, _ in calls:
        by_name.setdefault(called_name, []).append(called)
    seen: dict[str, int] = {}
    for j, part in enumerate(parts(content)):
        found = response_of(part)
        name = found.get("name") if found is not None else None
        if found is None or not isinstance(name, str):
            continue
        k = seen.get(name, 0)
        seen[name] = k + 1
        given = found.get("id")
        if isinstance(given, str) and given in keys:
            key = given
        elif k < len(by_name.get(name, [])):
            key = by_name[name][k]
        else:
            key = given if isinstance(given, str) and given else f"{name}#{k}"
        yield j, key, name, found.get("response")


def output_of(response: Any) -> tuple[str | None, str | None]:
    """(key, text) of a function response's output string (``OUTPUT_KEYS``), or (None, None)
    when its response holds none: an arbitrary object is not text ember may shorten."""
    if isinstance(response, dict):
        for key in OUTPUT_KEYS:
            value = response.get(key)
            if isinstance(value, str):
                return key, value
    return None, None


def response_text(response: Any) -> str:
    """A function response as transcript text: its output string, else its JSON."""
    _, text = output_of(response)
    if text is not None:
        return text
    return "" if response is None else dumps(response)


def response_failed(response: Any) -> bool:
    """A function response that reports failure in structure: an ``error`` key (Gemini CLI's
    way), or the structured error fields every wire format shares."""
    if isinstance(response, dict) and response.get("error"):
        return True
    return structured_error(response)

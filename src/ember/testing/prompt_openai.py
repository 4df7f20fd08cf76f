"""OpenAI requests flattened into the token sequence the automatic prompt cache sees.

Order: (Responses only) ``instructions``, then tool definitions, then messages / input items.
A message contributes a role marker token, then its content tokens, then the canonical JSON of
its remaining fields (``tool_calls``, ``tool_call_id``, ``name`` ...), so a change anywhere in a
message changes the sequence from that point on and never before it.
"""

from __future__ import annotations

from typing import Any

from ember.testing.tokens import canonical_json
from ember.testing.tokens import tokenize as _tokenize

_MEMO: dict[str, list[str]] = {}
_MEMO_TOKENS = 0
_MEMO_LIMIT = 2_000_000


def tokenize(text: str) -> list[str]:
    """Tokens of ``text``, memoised (bounded by total tokens held; treat the list as read-only).

    Agents resend the same messages every turn; memoising per message keeps the emulator's
    cost per request proportional to what is new rather than to the whole history.
    """
    global _MEMO_TOKENS
    tokens = _MEMO.get(text)
    if tokens is None:
        tokens = _tokenize(text)
        if _MEMO_TOKENS + len(tokens) > _MEMO_LIMIT:
            _MEMO.clear()
            _MEMO_TOKENS = 0
        _MEMO[text] = tokens
        _MEMO_TOKENS += len(tokens)
    return tokens


def _content_tokens(content: Any, out: list[str]) -> None:
    if isinstance(content, str):
        out.extend(tokenize(content))
        return
    if not isinstance(content, list):
        if content is not None:
            out.extend(tokenize(canonical_json(content)))
        return
    for part in content:
        if not isinstance(part, dict) or not isinstance(part.get("text"), str):
            out.extend(tokenize(canonical_json(part)))
            continue
        out.extend(tokenize(part["text"]))
        rest = {k: v for k, v in part.items() if k not in ("type", "text")}
        if rest:
            out.extend(tokenize(canonical_json(rest)))


def _message_tokens(message: Any, out: list[str]) -> None:
    if not isinstance(message, dict):
        out.extend(tokenize(canonical_json(message)))
        return
    role = message.get("role")
    if role is None:  # a Responses item that is not a message (function_call, ...)
        out.extend(tokenize(canonical_json(message)))
        return
    out.append(f"<|{role}|>")
    _content_tokens(message.get("content"), out)
    rest = {k: v for k, v in message.items() if k not in ("role", "content", "type")}
    if rest:
        out.extend(tokenize(canonical_json(rest)))


def _tool_tokens(body: dict[str, Any], out: list[str]) -> None:
    for tool in body.get("tools") or []:
        out.extend(tokenize(canonical_json(tool)))


def chat_tokens(body: dict[str, Any]) -> list[str]:
    """Tokens of a Chat Completions prompt: tools, then each message."""
    out: list[str] = []
    _tool_tokens(body, out)
    for message in body.get("messages") or []:
        _message_tokens(message, out)
    return out


def responses_tokens(body: dict[str, Any]) -> list[str]:
    """Tokens of a Responses prompt: instructions, tools, then the input."""
    out: list[str] = []
    instructions = body.get("instructions")
    if instructions is not None:
        out.append("<|instructions|>")
        if isinstance(instructions, list):
            for item in instructions:
                _message_tokens(item, out)
        else:
            _content_tokens(instructions, out)
    _tool_tokens(body, out)
    items = body.get("input")
    if isinstance(items, str):
        _message_tokens({"role": "user", "content": items}, out)
    elif isinstance(items, list):
        for item in items:
            _message_tokens(item, out)
    return out


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        return " ".join(t for t in texts if isinstance(t, str) and t)
    return ""


def latest_user_text(body: dict[str, Any]) -> str:
    """Text of the last user message (Chat ``messages`` or Responses ``input``)."""
    items = body.get("messages")
    if items is None:
        items = body.get("input")
        if isinstance(items, str):
            return items
    for item in reversed(items if isinstance(items, list) else []):
        if isinstance(item, dict) and item.get("role") == "user":
            return _text_of(item.get("content"))
    return ""

"""Rendering a reply as a Gemini answer: one ``GenerateContentResponse``, or its chunks.

A JSON answer has candidate 0 with the whole content, ``finishReason: STOP`` and the usage. A
stream (``?alt=sse``) is ``data:`` events ending in ``\\r\\n\\r\\n`` as Google writes them: one
chunk per few words of text, each function call whole in a chunk of its own, and a last chunk
with the finish reason and the usage; every chunk names the model and the response. Without
``alt=sse`` the same chunks come as one JSON array.

Thinking (a reply's ``thinking``; Gemini 3 models always think) is billed as
``thoughtsTokenCount``; its text is shown as a ``thought`` part only when the request set
``includeThoughts``, and its signature goes where Gemini puts it: on the first function call,
else on the last part. Usage: ``promptTokenCount`` is the whole prompt,
``cachedContentTokenCount`` the part read from the implicit cache (present only when there is
one).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from ember.testing.render_common import (
    Headers,
    Rendered,
    Turn,
    json_response,
    reply_headers,
    split_text,
    sse_response,
)
from ember.testing.render_common import dumps as _dumps
from ember.testing.tokens import count_tokens

#: Google's status names by HTTP status.
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def signature_for(thinking: str) -> str:
    """The ``thoughtSignature`` the emulator gives thinking: base64, as the API's is (the SDKs
    decode it into bytes), and the same for the same thinking."""
    digest = hashlib.sha256(b"ember-emulator-gemini-thought:" + thinking.encode()).digest()
    return base64.b64encode(b"EmuSig" + digest).decode()


def response_id(turn: Turn) -> str:
    return f"emu-gemini-{turn.serial:08d}"


def gemini_error(
    status: int, message: str, name: str | None = None, extra: Headers | None = None
) -> Rendered:
    """``{"error": {"code", "message", "status"}}``, Google's error shape."""
    name = name or STATUS_NAMES.get(status) or ("INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
    return json_response(
        status, {"error": {"code": status, "message": message, "status": name}}, extra
    )


def usage(turn: Turn, prompt: int, cached: int) -> dict[str, Any]:
    reply = turn.reply
    thoughts = count_tokens(reply.thinking) if reply.thinking else 0
    answer = max(reply.output_tokens() - thoughts, 1)
    out: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": answer,
        "totalTokenCount": prompt + answer + thoughts,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if cached:
        out["cachedContentTokenCount"] = cached
        out["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": cached}]
    if thoughts:
        out["thoughtsTokenCount"] = thoughts
    return out


def _parts(turn: Turn, show_thoughts: bool) -> list[dict[str, Any]]:
    reply = turn.reply
    parts: list[dict[str, Any]] = []
    if reply.thinking and show_thoughts:
        parts.append({"text": reply.thinking, "thought": True})
    if reply.text:
        parts.append({"text": reply.text})
    for call in reply.tool_calls:
        fn: dict[str, Any] = {"name": call.name, "args": dict(call.input)}
        if call.id:
            fn["id"] = call.id
        parts.append({"functionCall": fn})
    if reply.thinking:
        calls = [p for p in parts if "functionCall" in p]
        said = [p for p in parts if not p.get("thought")]
        signed = calls[0] if calls else (said[-1] if said else None)
        if signed is None:
            signed = {"text": ""}
            parts.append(signed)
        signed["thoughtSignature"] = signature_for(reply.thinking)
    return parts


def _chunk(turn: Turn, parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if "finishReason" in extra:
        candidate["finishReason"] = extra.pop("finishReason")
    return {
        "candidates": [candidate],
        **extra,
        "modelVersion": turn.model,
        "responseId": response_id(turn),
    }


def render_json(turn: Turn, prompt: int, cached: int, show_thoughts: bool) -> Rendered:
    body = _chunk(
        turn,
        _parts(turn, show_thoughts),
        finishReason="STOP",
        usageMetadata=usage(turn, prompt, cached),
    )
    return json_response(200, body, reply_headers(turn.reply))


def chunks(turn: Turn, prompt: int, cached: int, show_thoughts: bool) -> list[dict[str, Any]]:
    """The stream's chunks, in order (see the module)."""
    out: list[dict[str, Any]] = []
    for part in _parts(turn, show_thoughts):
        text = part.get("text")
        if not isinstance(text, str) or not text:
            out.append(_chunk(turn, [part]))
            continue
        pieces = split_text(text)
        for k, piece in enumerate(pieces):
            piece_part = {**part, "text": piece}
            if k < len(pieces) - 1:
                piece_part.pop("thoughtSignature", None)
            out.append(_chunk(turn, [piece_part]))
    out.append(_chunk(turn, [], finishReason="STOP", usageMetadata=usage(turn, prompt, cached)))
    return out


def _sse(chunk: dict[str, Any]) -> bytes:
    return f"data: {_dumps(chunk)}\r\n\r\n".encode()


def render_stream(
    turn: Turn, prompt: int, cached: int, show_thoughts: bool, sse: bool = True
) -> Rendered:
    """SSE events with ``alt=sse``; else the chunks as one JSON array."""
    found = chunks(turn, prompt, cached, show_thoughts)
    if not sse:
        return json_response(200, found, reply_headers(turn.reply))
    return sse_response([_sse(c) for c in found], reply_headers(turn.reply))


def render_failure(turn: Turn, rendered: Rendered) -> Rendered:
    """``rendered`` failing after ``reply.error_after`` events with ``data: {"error": ...}``
    (what Google sends when generation fails after the 200); JSON: a 200 body that is the
    error."""
    reply = turn.reply
    name = reply.error_type or "INTERNAL"
    code = next((c for c, n in STATUS_NAMES.items() if n == name), 500)
    error = {"error": {"code": code, "message": reply.message, "status": name}}
    if rendered.events is None:
        return json_response(200, error, reply_headers(reply))
    events = [*rendered.events[: reply.error_after or 0], _sse(error)]
    return Rendered(rendered.status, rendered.headers, events=events)

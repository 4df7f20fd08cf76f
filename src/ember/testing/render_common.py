"""What every protocol renderer shares: the rendered answer, SSE framing, chunking, errors.

Renderers are pure: they turn a :class:`Turn` plus usage numbers into a :class:`Rendered`
(status, headers, and either a JSON body or a list of complete SSE events). The emulator
decides how to put that on the wire (delays, cuts), so the shapes can be tested without HTTP.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ember.testing.replies import Reply

Headers = list[tuple[bytes, bytes]]

_WORD_START = re.compile(r"(?<!\S)\S")
JSON_PIECE = 24
WORDS_PER_DELTA = 3


@dataclass(frozen=True, slots=True)
class Turn:
    """One answer being rendered: which reply, for which model, and its serial number.

    ``serial`` makes ids (``msg_emu_...``, ``toolu_emu_...``) unique per emulator and
    reproducible across runs for the same sequence of requests.
    """

    serial: int
    model: str
    reply: Reply
    created: int
    request: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Rendered:
    """A complete answer. ``events is None`` means a JSON body; otherwise an SSE stream whose
    events are each complete (ending in a blank line), so a cut after N events is well-formed
    up to that point."""

    status: int
    headers: Headers
    body: bytes = b""
    events: list[bytes] | None = None


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def sse(event: str | None, data: Any) -> bytes:
    """One SSE event; ``event`` adds the ``event:`` line Anthropic and Responses streams need."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {dumps(data)}\n\n".encode()


def json_response(status: int, value: Any, extra: Headers | None = None) -> Rendered:
    body = dumps(value).encode()
    headers: Headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    return Rendered(status, headers + (extra or []), body=body)


def sse_response(events: list[bytes], extra: Headers | None = None) -> Rendered:
    headers: Headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    return Rendered(200, headers + (extra or []), events=events)


def fail_after(
    rendered: Rendered, after: int, event: bytes, body: Any, extra: Headers | None = None
) -> Rendered:
    """The first ``after`` events of a stream, then ``event`` (the protocol's in-stream error);
    a JSON answer becomes a 200 whose body is the error ``body``."""
    if rendered.events is None:
        return json_response(200, body, extra)
    return Rendered(rendered.status, rendered.headers, events=[*rendered.events[:after], event])


def close_after(rendered: Rendered, after: int) -> Rendered:
    """The first ``after`` events of a stream (which then ends cleanly); JSON unchanged."""
    if rendered.events is None:
        return rendered
    return Rendered(rendered.status, rendered.headers, events=rendered.events[:after])


def split_text(text: str, words: int = WORDS_PER_DELTA) -> list[str]:
    """Pieces of a few words each whose concatenation is exactly ``text`` (never empty list)."""
    starts = [m.start() for m in _WORD_START.finditer(text)][words::words]
    bounds = [0, *starts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)] or [""]


def split_json(text: str, size: int = JSON_PIECE) -> list[str]:
    """Fixed-size pieces of a JSON string, as ``input_json_delta`` / argument deltas arrive."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def reply_headers(reply: Reply) -> Headers:
    return [(k.lower().encode(), v.encode()) for k, v in reply.headers.items()]


_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_exceeded",
}


def anthropic_error(
    status: int, message: str, error_type: str | None = None, extra: Headers | None = None
) -> Rendered:
    """``{"type": "error", "error": {"type", "message"}}``, the Messages API's error shape."""
    kind = (
        error_type
        or _ANTHROPIC_TYPES.get(status)
        or ("api_error" if status >= 500 else "invalid_request_error")
    )
    return json_response(
        status, {"type": "error", "error": {"type": kind, "message": message}}, extra
    )


def openai_error(
    status: int,
    message: str,
    error_type: str | None = None,
    extra: Headers | None = None,
    param: str | None = None,
) -> Rendered:
    """``{"error": {"message", "type", "param", "code"}}``, the OpenAI APIs' error shape."""
    kind = (
        error_type
        or _OPENAI_TYPES.get(status)
        or ("server_error" if status >= 500 else "invalid_request_error")
    )
    error = {"message": message, "type": kind, "param": param, "code": None}
    return json_response(status, {"error": error}, extra)

"""A JSON-lines log of what the emulator received (``ember dev upstream --log FILE``).

One line per recorded request — an HTTP request, a WebSocket handshake, each WebSocket
message — written and flushed as soon as it has been answered, so a bench can read the file
while the emulator runs::

    {"time": 1767225600.123, "transport": "http", "method": "POST", "path": "/v1/messages",
     "model": "claude-sonnet-4-5", "stream": true, "shadow": "hot", "facts": 2,
     "usage": {"input_tokens": 40, "cache_read_tokens": 5120, "cache_write_tokens": 0,
               "output_tokens": 61}}

``shadow`` is ``"hot"``, ``"cold"`` or ``"none"`` (whether the request asked ember's shadow
question, ``ember.testing.shadow``); ``facts`` is how many facts the answer proposed (0 for
any other answer); ``usage`` is what the answer reported, normalised as ember counts it
(``endpoints.Usage``), or null when the answer reported none (an error, a handshake, a
caller that left before the answer began).

Invariant: a line is built only from the fields above, picked one by one out of the parsed
body — never headers, never the query string, never a body dump — so no credential the
caller sent (``x-api-key``, ``authorization``, a key in a URL) can reach the file, however
the request was malformed.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TextIO

from ember.testing.endpoints_gemini import path_model
from ember.testing.shadow import facts_in, shadow_path

if TYPE_CHECKING:
    from ember.testing.emulator import RecordedRequest
    from ember.testing.endpoints import Pending

Transport = Literal["http", "websocket"]


def _body(request: RecordedRequest) -> dict[str, Any]:
    try:
        value = json.loads(request.body) if request.body else None
    except (ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def entry(
    transport: Transport, request: RecordedRequest, pending: Pending | None, now: float
) -> dict[str, Any]:
    """The log line of one request (see the module docstring for its fields)."""
    body = _body(request)
    in_path, streams = path_model(request.path)  # Gemini names both in the path
    model = body.get("model", in_path)
    path = shadow_path(body)
    reply = pending.reply if pending is not None else None
    facts = facts_in(reply) if reply is not None and not reply.is_error and path else 0
    usage = pending.usage if pending is not None else None
    stream = transport == "websocket" and request.method != "GET"
    return {
        "time": round(now, 3),
        "transport": transport,
        "method": request.method,
        "path": request.path,
        "model": model if isinstance(model, str) else None,
        "stream": stream or streams or body.get("stream") is True,
        "shadow": path or "none",
        "facts": facts,
        "usage": dataclasses.asdict(usage) if usage is not None else None,
    }


class RequestLog:
    """Appends one flushed JSON line per request to ``stream`` (which the caller opened and
    closes). Writes are serialised, so lines from concurrent requests never interleave."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.time) -> None:
        self._stream = stream
        self._clock = clock
        self._lock = threading.Lock()

    def note(self, transport: Transport, request: RecordedRequest, pending: Pending | None) -> None:
        line = json.dumps(entry(transport, request, pending, self._clock()), ensure_ascii=False)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()

"""OpenAI Responses over WebSocket: ``GET /v1/responses`` upgraded (Codex with
``supports_websockets``, the OpenAI SDK's ``responses.connect()``).

After the upgrade both sides send JSON text messages. The client's ``response.create`` has the
same top-level fields as the body of ``POST /v1/responses`` (the stream is implied; Codex sends
``stream: true`` all the same), plus WebSocket-only ones: ``generate: false`` prepares the
request state without model output (Codex's prewarm; the id it returns is the next
``previous_response_id``) and ``stream_id`` names a lane whose requests run first in, first
out. ``response.append`` (the older beta's continuation: new input items after the previous
response) is answered like a create; ``response.processed`` and ``response.steer`` start no
response. The server answers each request with the same typed events as the SSE stream, one
JSON message each, ending in ``response.completed`` / ``response.incomplete`` /
``response.failed``; events echo the request's ``stream_id``. A request that fails before it
starts is one ``error`` event holding the HTTP ``status`` it would have had, e.g.
``{"type": "error", "status": 429, "error": {"type", "code", "message"}}``; Codex maps that
status exactly as it maps the status of an HTTP answer.

Sources: the ``openai`` SDK's ``responses.connect`` and its ``ResponseCreate`` /
``ResponseWsError`` types; Codex's ``codex-api`` ``endpoint/responses_websocket.rs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from ember.protocols.base import AnswerError
from ember.protocols.openai_chat import openai_error_body

#: The client message that asks for a response; its other fields are a ``POST`` body.
CREATE = "response.create"
#: Client messages the server answers with a response: a create, and the continuation of the
#: previous response with new ``input`` items of the older beta (``responses_websockets=
#: 2026-02-04``; Codex sends a create with ``previous_response_id`` under ``2026-02-06``).
ANSWERED = frozenset({CREATE, "response.append"})
#: Events after which the response they belong to gets no further event.
TERMINAL_EVENTS = frozenset(
    {"response.completed", "response.incomplete", "response.failed", "error"}
)


@dataclass(frozen=True, slots=True)
class EventHead:
    """What the relay needs from a server event: its ``type``, lane (``stream_id``) and the id
    of the response it carries (lifecycle events: ``response.created``, ``...completed``)."""

    type: str | None
    lane: str | None
    response_id: str | None = None
    #: the response's output items, on a terminal event that carries the response
    output: list[Any] | None = None

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL_EVENTS


def message_type(value: Any) -> str | None:
    """The ``type`` of a parsed client message, or None when it has none."""
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else None


def lane(value: Any) -> str | None:
    """The ``stream_id`` of a parsed client message or server event (None: the default lane)."""
    sid = value.get("stream_id") if isinstance(value, dict) else None
    return sid if isinstance(sid, str) else None


def event_head(text: str) -> EventHead:
    """Type and lane of one server event; an event that is not a JSON object has neither."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return EventHead(None, None)
    response = value.get("response") if isinstance(value, dict) else None
    rid = response.get("id") if isinstance(response, dict) else None
    output = response.get("output") if isinstance(response, dict) else None
    return EventHead(
        message_type(value),
        lane(value),
        rid if isinstance(rid, str) else None,
        output if isinstance(output, list) else None,
    )


def previous_response(value: Any) -> str | None:
    """The ``previous_response_id`` a request continues from, if any."""
    prev = value.get("previous_response_id") if isinstance(value, dict) else None
    return prev if isinstance(prev, str) and prev else None


def error_event(status: int, message: str, stream_id: str | None = None) -> str:
    """A request-scoped ``error`` event as the server sends it, in the OpenAI error shape."""
    inner = orjson.loads(openai_error_body(status, message))["error"]
    event: dict[str, Any] = {"type": "error", "status": status, "error": inner}
    if stream_id is not None:
        event["stream_id"] = stream_id
    return orjson.dumps(event).decode()


#: Keys of a WebSocket create that a ``POST /v1/responses`` body does not have.
_SOCKET_ONLY = frozenset({"type", "previous_response_id", "generate", "stream_id"})


def standalone_body(value: Any, prior: list[Any]) -> dict[str, Any]:
    """A create (or append) as the body of a ``POST /v1/responses`` asking the same thing:
    ``prior`` (the input and output items of the response it continues, ``[]`` for none)
    followed by its own input, without the socket's own keys. OpenAI caches by the prompt's
    tokens, so this body reads the cache the socket's request wrote."""
    own = value.get("input") if isinstance(value, dict) else None
    items = [{"role": "user", "content": own}] if isinstance(own, str) else list(own or [])
    body = {k: v for k, v in value.items() if k not in _SOCKET_ONLY}
    body["input"] = [*prior, *items]
    return body


def refused(text: str) -> AnswerError | None:
    """The error of an ``error`` event that refused a request before it began (with the
    HTTP status it would have had), else None."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or value.get("type") != "error":
        return None
    status = value.get("status")
    found = value.get("error")
    inner: dict[str, Any] = found if isinstance(found, dict) else {}
    kind = str(inner.get("type") or inner.get("code") or "error")
    return AnswerError(
        kind, str(inner.get("message") or ""), status if isinstance(status, int) else 500
    )

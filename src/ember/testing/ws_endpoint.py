"""The emulator's Responses over WebSocket (``GET /v1/responses`` upgraded).

Each ``response.create`` gets what ``POST /v1/responses`` with ``stream: true`` gets -- the
same validation, scripted reply, prompt-cache model and events -- one JSON text message per
event, echoing the create's ``stream_id``; ``generate: false`` caches the prompt and generates
nothing; a ``response.append`` continues the connection's last response with its new items.
An error answer (a scripted ``Reply.error``, a 400) is one ``error`` event holding its status.
Requests are answered in the order they arrive. As on the real API, the connection keeps
its responses: a create naming a ``previous_response_id`` of this connection continues from that
response's input and output, so the cache model sees the whole prompt.

Wire faults: ``cut_after`` sends that many events and then drops the connection without a close
frame; ``close_after`` sends that many and then closes it cleanly (1000); ``delay`` and
``delay_headers`` as over HTTP. ``Emulator.refuse_websocket`` answers the handshake with that
status instead (426 makes Codex fall back to HTTP at once; 404 is what an HTTP-only server says).

Every handshake is recorded as a ``GET`` request with no body, every message received as a
``WEBSOCKET`` request whose body is the message's exact bytes. Each is noted in the emulator's
log (``Emulator.note``) once answered: a message as the model saw it (after its
continuation), so a shadow question asked over a socket is logged as one.

Replies come from ``endpoints.responses_socket`` and so from ``Emulator.next_reply``: the
script, then ``reply_fn``, then the default — the same order as over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ember.testing import endpoints
from ember.testing.asgi_io import Receive, Scope, Send
from ember.testing.render_common import Rendered, dumps, openai_error

if TYPE_CHECKING:
    from ember.testing.emulator import Emulator, RecordedRequest

PATH = "/v1/responses"
#: The ``method`` of a recorded WebSocket message.
MESSAGE = "WEBSOCKET"

Record = Callable[[str, Scope, bytes], "RecordedRequest"]
#: Client messages answered with a response (``response.append`` is the older beta's
#: continuation: new input items after the connection's last response).
_ANSWERED = ("response.create", "response.append")


@dataclass
class _Socket:
    """One accepted connection: what arrived, whether the client left, the responses it keeps."""

    inbox: asyncio.Queue[str | bytes | None] = field(default_factory=asyncio.Queue)
    gone: asyncio.Event = field(default_factory=asyncio.Event)
    inputs: dict[str, list[Any]] = field(default_factory=dict)
    last_create: dict[str, Any] | None = None
    last_response: str | None = None


async def serve(emu: Emulator, scope: Scope, receive: Receive, send: Send, record: Record) -> None:
    if (await receive())["type"] != "websocket.connect":
        return
    handshake = record("GET", scope, b"")
    refusal = 404 if scope["path"] != PATH else emu.refuse_websocket
    emu.note("websocket", handshake, None)
    if refusal is not None:
        rendered = openai_error(refusal, f"WebSocket upgrade refused ({refusal})")
        start = {"status": rendered.status, "headers": rendered.headers}
        await send({"type": "websocket.http.response.start", **start})
        await send({"type": "websocket.http.response.body", "body": rendered.body})
        return
    await send({"type": "websocket.accept"})
    sock = _Socket()
    reader = asyncio.ensure_future(_read(receive, sock))
    emu.websocket_opened(+1)
    try:
        while (message := await sock.inbox.get()) is not None:
            raw = message.encode() if isinstance(message, str) else message
            if not await _answer(emu, sock, record(MESSAGE, scope, raw), send):
                return
    except OSError:  # the client went away mid-answer
        return
    finally:
        emu.websocket_opened(-1)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


async def _read(receive: Receive, sock: _Socket) -> None:
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            sock.gone.set()
            sock.inbox.put_nowait(None)
            return
        text = message.get("text")
        sock.inbox.put_nowait(text if text is not None else message.get("bytes") or b"")


async def _answer(emu: Emulator, sock: _Socket, request: RecordedRequest, send: Send) -> bool:
    """Answer one message and note it; False when the connection is over (dropped, closed,
    client gone)."""
    seen, value = _continued(sock, request)
    if isinstance(value, dict) and value.get("type") not in (None, *_ANSWERED):
        emu.note("websocket", seen, None)
        return True  # response.processed and the like: nothing to answer
    pending = endpoints.responses_socket(emu, seen)
    try:
        return await _send_answer(emu, sock, seen, pending, value, send)
    finally:
        emu.note("websocket", seen, pending)


async def _send_answer(
    emu: Emulator,
    sock: _Socket,
    seen: RecordedRequest,
    pending: endpoints.Pending,
    value: Any,
    send: Send,
) -> bool:
    lane = value.get("stream_id") if isinstance(value, dict) else None
    reply = pending.reply
    if reply is None:  # refused at once (a 400)
        return await _send_all(send, sock, _events(pending.finish(), lane), 0.0)
    if await _gone_within(sock, emu.latency + reply.delay_headers):
        return False
    rendered = pending.finish()
    events = _events(rendered, lane)
    if rendered.events is not None and reply.cut_after is not None:
        await _send_all(send, sock, events[: reply.cut_after], reply.delay)
        return False  # ending the app without a close frame drops the connection
    if rendered.events is not None and reply.close_after is not None:
        await _send_all(send, sock, events[: reply.close_after], reply.delay)
        await send({"type": "websocket.close", "code": 1000})
        return False
    sent = await _send_all(send, sock, events, reply.delay)
    if sent and rendered.events is not None:
        _keep(sock, seen, events[-1])
    return sent


def _continued(sock: _Socket, request: RecordedRequest) -> tuple[RecordedRequest, Any]:
    """The request as the model sees it (after the input and output of the response named by
    ``previous_response_id``, when this connection holds it), and the parsed message."""
    try:
        value = json.loads(request.body)
    except ValueError:
        return request, None
    if not isinstance(value, dict):
        return request, value
    if value.get("type") == "response.create":
        sock.last_create = value
    elif value.get("type") == "response.append" and sock.last_create is not None:
        # the older beta's continuation: the last create's parameters, the new items after
        # the last response
        fields = {"input": value.get("input"), "previous_response_id": sock.last_response}
        value = {**sock.last_create, **fields, "type": "response.append"}
    prior = sock.inputs.get(str(value.get("previous_response_id")))
    if prior is None:
        return dataclasses.replace(request, body=json.dumps(value).encode()), value
    body = json.dumps({**value, "input": prior + _items(value.get("input"))}).encode()
    return dataclasses.replace(request, body=body), value


def _items(value: Any) -> list[Any]:
    return [{"role": "user", "content": value}] if isinstance(value, str) else list(value or [])


def _keep(sock: _Socket, request: RecordedRequest, last: str) -> None:
    """Remember a finished response's whole input and output for later continuations."""
    final = json.loads(last)
    response = final.get("response") if final.get("type") == "response.completed" else None
    if isinstance(response, dict):
        items = _items(json.loads(request.body).get("input"))
        sock.inputs[str(response["id"])] = items + list(response.get("output") or [])
        sock.last_response = str(response["id"])


def _events(rendered: Rendered, lane: Any) -> list[str]:
    """One JSON text per event; an error answer is one ``error`` event holding its status."""
    if rendered.events is None:
        error = json.loads(rendered.body).get("error")
        payloads = [{"type": "error", "status": rendered.status, "error": error}]
    else:
        payloads = [json.loads(_data_line(e)) for e in rendered.events]
    if isinstance(lane, str):
        payloads = [{**p, "stream_id": lane} for p in payloads]
    return [dumps(p) for p in payloads]


def _data_line(event: bytes) -> bytes:
    for line in event.split(b"\n"):
        if line.startswith(b"data: "):
            return line[len(b"data: ") :]
    raise ValueError(f"SSE event without data: {event[:80]!r}")


async def _send_all(send: Send, sock: _Socket, events: list[str], delay: float) -> bool:
    for i, text in enumerate(events):
        if i and delay > 0 and await _gone_within(sock, delay):
            return False
        if sock.gone.is_set():
            return False
        await send({"type": "websocket.send", "text": text})
    return True


async def _gone_within(sock: _Socket, seconds: float) -> bool:
    """Sleep ``seconds``; True as soon as the client has gone away instead."""
    if seconds <= 0:
        return sock.gone.is_set()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(sock.gone.wait(), seconds)
    return sock.gone.is_set()

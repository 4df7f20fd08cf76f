"""One accepted Responses WebSocket: requests through the pipeline, events back as they arrive.

Invariants:
- Each ``response.create`` is an exchange exactly like a ``POST /v1/responses``: the same
  adapter and request stages (their edits are splices into the client's message, whose ``type``
  key the adapter ignores and the provider needs), one accounting row per create, and the
  response stages run in the background once its last event is with the client. A
  ``response.append`` (the older beta's continuation) is answered and accounted the same way
  but not edited: it carries new input items only.
- Client messages reach the provider in the order they were sent; provider events reach the
  client in the order they arrive, each before ember looks at it.
- An event belongs to the oldest unfinished create of its lane (``stream_id``; the provider
  answers a lane first in, first out) and a terminal event finishes that create.
- A client that goes away closes the provider's socket at once, so the provider stops
  generating; its unfinished responses are ``cancelled``. A provider that goes away, or stays
  silent for ``upstream_read_timeout`` while a response is unfinished, closes the client's
  socket; unfinished responses are ``cut``.
- A message ember cannot read (not a JSON object, nested past ``max_json_depth``) is answered
  with an ``error`` event of status 400, one past ``max_body_mb`` with status 413, by the same
  code that answers them on HTTP (``proxy.transport``; ``SocketMessage`` is this framing), and
  goes no further.
- Codex sends only its first request of a thread with the whole history (later ones name a
  ``previous_response_id`` and carry new items only: no developer prompt, another first
  message). A request continuing a response of this socket is therefore of that response's
  thread (read alone it would pass for another agent, which shaping and memory leave alone),
  and the project found on a socket stays the project of its later requests that name none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import aiohttp
import orjson

from ember.config import Settings
from ember.errors import RequestTooLarge
from ember.exchange import Exchange, OutcomeKind
from ember.protocols import ADAPTERS
from ember.protocols.openai_responses import opens_with_system
from ember.protocols.responses_ws import (
    ANSWERED,
    CREATE,
    error_event,
    event_head,
    lane,
    message_type,
    previous_response,
    refused,
    standalone_body,
)
from ember.proxy import limits
from ember.proxy.delivery import Delivered, Framing
from ember.proxy.flow import ExchangeFlow, Turn
from ember.proxy.relay import Receive, Send
from ember.proxy.transport import read_request

if TYPE_CHECKING:
    from ember.project import ProjectRef
    from ember.threads import Thread

log = logging.getLogger(__name__)

#: The one path served over WebSocket, and its adapter.
PATH = "/v1/responses"
ADAPTER = ADAPTERS[PATH]
#: Close codes a server may send on to its client (RFC 6455 7.4); others become 1011.
_SENDABLE_CLOSE = frozenset({1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013})

#: Responses whose thread is remembered (Codex continues the last one; a few spare for lanes).
_THREADS_KEPT = 64
#: Responses whose whole conversation is kept, to rebuild a continuation as a request of its
#: own (``Delivered.sent``). Codex continues the socket's last response; the items are shared
#: with the requests that carried them, so each kept history costs its list, not its text.
_HISTORIES_KEPT = 8

Ended = Literal["client", "provider", "ember"]


class SocketMessage:
    """One client message as a transport (``proxy.transport``): its bytes, within
    ``max_body_mb``, and ember's own errors as ``error`` events on the socket."""

    framing: Framing = "events"
    where = f"a WebSocket message on {PATH}"

    def __init__(self, text: str, send: Send, settings: Settings) -> None:
        self.text = text
        self.send = send
        self.settings = settings

    async def read(self) -> bytes:
        raw = self.text.encode()
        limit = limits.body_limit(self.settings)
        if len(raw) > limit:
            raise RequestTooLarge(limit)
        return raw

    async def error(
        self,
        status: int,
        message: str,
        *,
        close: bool = False,
        retry: bool = True,
        retry_after: float | None = None,
    ) -> bytes:
        """An ``error`` event; the socket stays open (``close`` and the retry hints have no
        place in an event)."""
        event = error_event(status, message)
        await self.send({"type": "websocket.send", "text": event})
        return event.encode()


@dataclass
class _Flight:
    """One ``response.create`` sent upstream and not yet finished."""

    turn: Turn
    lane: str | None
    sent: float = 0.0
    ttfb_ms: float | None = None
    started: bool = False
    texts: list[str] = field(default_factory=list)
    #: the request's input opens with a system prompt, or inherits one it continues
    has_system: bool = False
    #: the request as one standalone body, the whole history in its ``input`` (None: the
    #: response it continues is not known here, so no such body can be built)
    whole: dict[str, Any] | None = None

    @property
    def ex(self) -> Exchange:
        return self.turn.ex


@dataclass(frozen=True)
class _Prior:
    """What a continuation takes from the response it continues."""

    thread: Thread | None
    has_system: bool


class ResponsesSession:
    def __init__(
        self,
        flow: ExchangeFlow,
        settings: Settings,
        receive: Receive,
        send: Send,
        upstream: aiohttp.ClientWebSocketResponse,
        headers: dict[str, str],
        query: str,
    ) -> None:
        self.flow = flow
        self.settings = settings
        self.receive = receive
        self.send = send
        self.upstream = upstream
        self.headers = headers
        self.query = query
        self.read_timeout = settings.upstream_read_timeout
        self._lanes: dict[str | None, deque[_Flight]] = {}
        self._project: ProjectRef | None = None
        #: thread and system prompt of each recent response created on this socket, by id
        self._threads: OrderedDict[str, _Prior] = OrderedDict()
        #: the whole conversation (input and output items) of recent responses, by id
        self._histories: OrderedDict[str, list[Any]] = OrderedDict()
        self._last_response: str | None = None
        self._last_activity = time.monotonic()
        self._error: str | None = None
        self._faulted = False

    async def run(self) -> None:
        reader = asyncio.create_task(self._client_to_provider())
        writer = asyncio.create_task(self._provider_to_client())
        try:
            done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
            ended: Ended = (reader if reader in done else writer).result()
        finally:
            for task in (reader, writer):
                task.cancel()
            await asyncio.gather(reader, writer, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self.upstream.close()
        kind: OutcomeKind = "cancelled" if ended == "client" else "cut"
        error = "client disconnected" if ended == "client" else self._error
        for queue in self._lanes.values():
            while queue:
                self._finish(queue.popleft(), kind, error)
        if ended != "client":
            await self._close_client()

    # -- client -> provider -----------------------------------------------------------------

    async def _client_to_provider(self) -> Ended:
        try:
            while True:
                message = await self.receive()
                if message["type"] == "websocket.disconnect":
                    return "client"
                if message.get("text") is not None:
                    await self._on_text(message["text"])
                elif message.get("bytes") is not None:
                    await self.upstream.send_bytes(message["bytes"])
        except (aiohttp.ClientError, ConnectionError) as exc:
            return self._fault(f"could not send to the provider: {exc!r}")
        except OSError:  # the client went away while ember answered it
            return "client"
        except Exception:
            log.exception("unexpected error relaying a client WebSocket message")
            return self._fault("ember: internal error", "ember")

    async def _on_text(self, text: str) -> None:
        message = SocketMessage(text, self.send, self.settings)
        raw = await read_request(message, self.settings)
        if raw is None:
            return
        ex = await self.flow.admit(message, ADAPTER, PATH, self.query, self.headers, raw)
        if ex is None:
            return
        self._on_socket(ex)
        kind = message_type(ex.doc.value)
        if kind not in ANSWERED:
            await self.upstream.send_str(text)  # response.processed, response.steer...: as sent
            return
        inherited = self._continue_thread(ex, kind)
        # an append has no instructions or tools for the stages to edit
        turn = await self.flow.prepare(ex, message, edit=kind == CREATE)
        if turn is None:
            return
        try:  # from here the session's end finishes the flight
            flight = _Flight(turn, lane(ex.doc.value))
            flight.has_system = inherited or opens_with_system(ex.doc.value)
            flight.whole = self._whole(ex.doc.value, kind)
            self._lanes.setdefault(flight.lane, deque()).append(flight)
        except BaseException:
            turn.abandon()
            raise
        flight.sent = self._last_activity = time.monotonic()
        await self.upstream.send_str(ex.doc.to_bytes().decode() if ex.doc.edited else text)

    def _continue_thread(self, ex: Exchange, kind: str | None) -> bool:
        """A continuation of a response of this socket is of that response's thread, and
        inherits its system prompt when it had one (True); an append continues the socket's
        last response. A continuation of a response without one gets ember's block itself."""
        if kind == CREATE:
            prior = self._threads.get(previous_response(ex.doc.value) or "")
        else:
            prior = next(reversed(self._threads.values()), None)
        if prior is None:
            return False
        if prior.thread is not None:
            ex.thread = prior.thread
        ex.inherits_no_system = kind == CREATE and not prior.has_system
        return prior.has_system

    def _whole(self, value: Any, kind: str | None) -> dict[str, Any] | None:
        """The request (as the stages left it) as one standalone body: the history of the
        response it continues, then its own items (an append continues the last response)."""
        previous = previous_response(value) if kind == CREATE else self._last_response
        prior: list[Any] | None = []
        if previous is not None:
            prior = self._histories.get(previous)
        return standalone_body(value, prior) if prior is not None else None

    def _keep_history(self, flight: _Flight, output: list[Any] | None, response_id: str) -> None:
        if flight.whole is None or output is None:
            return
        self._histories[response_id] = [*flight.whole["input"], *output]
        self._last_response = response_id
        while len(self._histories) > _HISTORIES_KEPT:
            self._histories.popitem(last=False)

    def _on_socket(self, ex: Exchange) -> None:
        """The exchange came on this socket: it takes the socket's project when it names
        none, and gives the socket its own."""
        ex.over_socket = True
        if ex.project is not None:
            self._project = ex.project
        elif self._project is not None:
            ex.project = self._project

    # -- provider -> client -----------------------------------------------------------------

    async def _provider_to_client(self) -> Ended:
        try:
            while True:
                try:
                    message = await self.upstream.receive(timeout=self._silence_budget())
                except TimeoutError:
                    if self._silent_too_long():
                        return self._fault(f"the provider sent nothing for {self.read_timeout:g}s")
                    continue
                if message.type is aiohttp.WSMsgType.TEXT:
                    await self._to_client(message.data)
                    self._on_event(message.data)
                elif message.type is aiohttp.WSMsgType.BINARY:
                    await self.send({"type": "websocket.send", "bytes": message.data})
                else:  # CLOSE, CLOSED, ERROR
                    self._error = "the provider closed the socket before the response ended"
                    if message.type is aiohttp.WSMsgType.ERROR:
                        return self._fault(f"the provider's socket failed: {message.data!r}")
                    return "provider"
        except OSError:  # the client went away while ember answered it
            return "client"
        except Exception:
            log.exception("unexpected error relaying a provider WebSocket event")
            return self._fault("ember: internal error", "ember")

    def _on_event(self, text: str) -> None:
        now = time.monotonic()
        self._last_activity = now
        head = event_head(text)
        queue = self._lanes.get(head.lane)
        if not queue:
            return  # an event of no request (rate limits, an acknowledgement): passed on only
        flight = queue[0]
        if flight.ttfb_ms is None:
            flight.ttfb_ms = (now - flight.sent) * 1000
        if head.type == "response.created":
            flight.started = True
            if head.response_id is not None:
                self._threads[head.response_id] = _Prior(flight.ex.thread, flight.has_system)
                while len(self._threads) > _THREADS_KEPT:
                    self._threads.popitem(last=False)
        flight.texts.append(text)
        if head.terminal:
            queue.popleft()
            if head.response_id is not None:
                self._keep_history(flight, head.output, head.response_id)
            self._finish(flight, "ok", None)

    def _in_flight(self) -> bool:
        return any(self._lanes.values())

    def _silence_budget(self) -> float:
        if not self._in_flight():
            return self.read_timeout
        return max(0.01, self.read_timeout - (time.monotonic() - self._last_activity))

    def _silent_too_long(self) -> bool:
        return self._in_flight() and time.monotonic() - self._last_activity >= self.read_timeout

    # -- endings ----------------------------------------------------------------------------

    async def _to_client(self, text: str) -> None:
        await self.send({"type": "websocket.send", "text": text})

    def _fault(self, error: str, ended: Ended = "provider") -> Ended:
        """Record why the session failed (not a clean close by the provider)."""
        self._error, self._faulted = error, True
        log.warning("Responses WebSocket ended: %s", error)
        return ended

    async def _close_client(self) -> None:
        """Close with the provider's own close code, or 1011 when the session failed."""
        code = self.upstream.close_code
        if self._faulted or code not in _SENDABLE_CLOSE:
            code = 1011
        with contextlib.suppress(Exception):
            await self.send({"type": "websocket.close", "code": code})

    def _finish(self, flight: _Flight, kind: OutcomeKind, error: str | None) -> None:
        """Hand the response to the flow: its events as the answer's chunks, and the request
        as a standalone body (what the provider saw), for the response stages."""
        status = 200 if flight.texts else 0
        refusal = refused(flight.texts[-1]) if flight.texts and not flight.started else None
        if refusal is not None:  # refused before it began, with the status HTTP would have had
            status, kind, error = refusal.status, "upstream_error", refusal.describe()
        sent = b"" if flight.whole is None else orjson.dumps(flight.whole)
        delivered = Delivered(
            status=status,
            kind=kind,
            streamed=True,
            chunks=[t.encode() for t in flight.texts],
            ttfb_ms=flight.ttfb_ms,
            error=error,
            sent=sent,
            sent_value=flight.whole,
            framing="events",
        )
        flight.turn.finish(delivered)

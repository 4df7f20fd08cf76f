"""The provider emulator: one ASGI app speaking Anthropic Messages, OpenAI Chat and Responses
(over HTTP, and Responses over WebSocket too: ``ws_endpoint``) and Google's Gemini
(``endpoints_gemini``).

Point the official SDKs (directly, or through the proxy under test) at it, script what the
"model" answers, then assert on :attr:`Emulator.requests` (the exact bytes that arrived) and on
the usage numbers, which come from faithful models of both providers' prompt caches.

Everything is deterministic given the sequence of requests and the emulator clock; the clock can
be moved forward with :meth:`Emulator.advance` to test cache expiry without sleeping. State
shared with test threads (recordings, script queue, caches) sits behind one lock.

With :attr:`Emulator.log` set (``ember dev upstream --log``), every recorded request is also
noted there once answered (``request_log``: one JSON line each, never a credential).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ember.testing import endpoints, endpoints_gemini, ws_endpoint
from ember.testing.asgi_io import (
    Receive,
    Scope,
    Send,
    lifespan,
    read_body,
    send_rendered,
    wait_unless_disconnected,
)
from ember.testing.cache_model import AnthropicCache, AnthropicUsage, OpenAICache
from ember.testing.prompt_anthropic import AnthropicPrompt
from ember.testing.render_common import Turn, json_response
from ember.testing.replies import Reply, default_reply
from ember.testing.request_log import RequestLog, Transport

ReplyFn = Callable[[dict[str, Any], str], Reply | None]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request exactly as it arrived: header names lower-cased, body as raw bytes."""

    method: str
    path: str
    query_string: str
    headers: list[tuple[str, str]]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON (raises ``ValueError`` when it is not JSON)."""
        return json.loads(self.body)

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or ``None``."""
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    @property
    def headers_dict(self) -> dict[str, str]:
        """Headers as a dict; for repeated names the last value wins."""
        return dict(self.headers)

    @property
    def api_key(self) -> str:
        """The caller's credential: ``x-api-key``, else ``authorization`` without ``Bearer``.

        It identifies the "organisation" whose cache a request may read, so a proxy that
        swapped or dropped credentials shows up as cache misses.
        """
        key = self.header("x-api-key")
        if key is not None:
            return key
        auth = self.header("authorization") or ""
        return auth[7:] if auth.lower().startswith("bearer ") else auth


class Emulator:
    """ASGI3 app emulating the providers. See the module docstring.

    ``anthropic_min_tokens`` overrides the per-model minimum cacheable prefix (an int for every
    model, or a mapping of model-name prefixes merged into the default table);
    ``openai_min_tokens`` / ``openai_step`` set OpenAI's automatic caching thresholds,
    ``gemini_min_tokens`` / ``gemini_step`` Gemini's implicit ones (1024: Gemini 2.5 Flash's
    documented minimum).
    ``latency`` is a fixed delay before every model answer (0 for benchmarks).
    ``verify_thinking_signatures`` makes a modified thinking block in the latest assistant turn
    a 400, as on the real API.
    """

    def __init__(
        self,
        clock: Callable[[], float] | None = None,
        *,
        anthropic_min_tokens: Mapping[str, int] | int | None = None,
        openai_min_tokens: int = 1024,
        openai_step: int = 128,
        gemini_min_tokens: int = 1024,
        gemini_step: int = 128,
        latency: float = 0.0,
        verify_thinking_signatures: bool = True,
    ) -> None:
        self._clock = clock or time.monotonic
        self._offset = 0.0
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._queue: deque[Reply] = deque()
        self._serial = itertools.count(1)
        self.reply_fn: ReplyFn | None = None
        self.latency = latency
        self.verify_thinking_signatures = verify_thinking_signatures
        #: Answer WebSocket handshakes with this HTTP status instead of upgrading (None: serve
        #: Responses over WebSocket; 426 is a clean refusal, 404 what an HTTP-only server says).
        self.refuse_websocket: int | None = None
        self._open_websockets = 0
        #: Where each request is noted once answered (None: nowhere).
        self.log: RequestLog | None = None
        self.anthropic_cache = AnthropicCache(anthropic_min_tokens)
        self.openai_cache = OpenAICache(openai_min_tokens, openai_step)
        self.gemini_cache = OpenAICache(gemini_min_tokens, gemini_step)

    # -- recordings -------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            if not self._requests:
                raise LookupError("the emulator has received no request yet")
            return self._requests[-1]

    @property
    def open_websockets(self) -> int:
        """WebSocket connections accepted and not yet over (a proxy that aborts an upstream
        socket when its client leaves brings this back to 0)."""
        with self._lock:
            return self._open_websockets

    def websocket_opened(self, delta: int) -> None:
        with self._lock:
            self._open_websockets += delta

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def note(
        self, transport: Transport, request: RecordedRequest, pending: endpoints.Pending | None
    ) -> None:
        """Note an answered (or abandoned) request in :attr:`log`, when there is one."""
        if self.log is not None:
            self.log.note(transport, request, pending)

    # -- scripting ----------------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Queue replies; each model request (any protocol) takes the next one, FIFO."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending_replies(self) -> int:
        with self._lock:
            return len(self._queue)

    def clear_script(self) -> None:
        with self._lock:
            self._queue.clear()

    def next_reply(self, body: dict[str, Any], path: str, user_text: Callable[[], str]) -> Reply:
        """The scripted reply, else ``reply_fn``'s, else the deterministic default."""
        with self._lock:
            scripted = self._queue.popleft() if self._queue else None
        if scripted is not None:
            return scripted
        if self.reply_fn is not None:
            chosen = self.reply_fn(body, path)
            if chosen is not None:
                return chosen
        return default_reply(user_text())

    # -- clock and caches ---------------------------------------------------------------------

    def now(self) -> float:
        """The emulator clock: the base clock plus everything :meth:`advance` added."""
        return self._clock() + self._offset

    def advance(self, seconds: float) -> None:
        """Move the emulator clock forward (cache TTL tests) without sleeping."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._offset += seconds

    def reset_cache(self) -> None:
        with self._lock:
            self.anthropic_cache.clear()
            self.openai_cache.clear()
            self.gemini_cache.clear()

    def commit_anthropic(self, prompt: AnthropicPrompt, api_key: str) -> AnthropicUsage:
        with self._lock:
            return self.anthropic_cache.commit(prompt, self.now(), api_key)

    def commit_openai(self, body: dict[str, Any], tokens: Sequence[str], api_key: str) -> int:
        key = body.get("prompt_cache_key")
        with self._lock:
            return self.openai_cache.evaluate(
                str(body["model"]), tokens, self.now(), str(key or ""), api_key
            )

    def commit_gemini(self, model: str, tokens: Sequence[str], api_key: str) -> int:
        """``cachedContentTokenCount`` for a Gemini prompt; commits its prefixes."""
        with self._lock:
            return self.gemini_cache.evaluate(model, tokens, self.now(), "", api_key)

    def turn(self, model: str, reply: Reply, body: dict[str, Any]) -> Turn:
        return Turn(next(self._serial), model, reply, int(time.time()), body)

    # -- ASGI ---------------------------------------------------------------------------------

    def _record(self, method: str, scope: Scope, body: bytes) -> RecordedRequest:
        request = RecordedRequest(
            method=method,
            path=scope["path"],
            query_string=scope.get("query_string", b"").decode("latin-1"),
            headers=[
                (k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]
            ],
            body=body,
        )
        with self._lock:
            self._requests.append(request)
        return request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] == "websocket":
            await ws_endpoint.serve(self, scope, receive, send, self._record)
            return
        if scope["type"] != "http":
            return
        request = self._record(scope["method"], scope, await read_body(receive))
        if request.method == "GET" and request.path == "/healthz":
            pending = endpoints.Pending(None, lambda: (json_response(200, {"status": "ok"}), None))
        else:
            handler = _ROUTES.get((request.method, request.path))
            handler = handler or endpoints_gemini.route(request.method, request.path)
            pending = (handler or endpoints.not_found)(self, request)
        try:
            await self._answer(pending, receive, send)
        finally:
            self.note("http", request, pending)

    async def _answer(self, pending: endpoints.Pending, receive: Receive, send: Send) -> None:
        reply = pending.reply
        if reply is None:
            await send_rendered(send, receive, pending.finish())
            return
        wait = self.latency + reply.delay_headers
        if wait > 0 and await wait_unless_disconnected(receive, wait):
            return
        await send_rendered(send, receive, pending.finish(), reply.cut_after, reply.delay)


_ROUTES: dict[tuple[str, str], Callable[[Emulator, RecordedRequest], endpoints.Pending]] = {
    ("POST", "/v1/messages"): endpoints.messages,
    ("POST", "/v1/messages/count_tokens"): endpoints.count_tokens,
    ("POST", "/v1/chat/completions"): endpoints.chat_completions,
    ("POST", "/v1/responses"): endpoints.responses,
}

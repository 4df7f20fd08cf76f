"""One exchange's lifecycle, the same for every transport (HTTP POST and Responses over
WebSocket).

A transport only moves bytes; everything a feature sees of an exchange goes through here:
- ``open``: the client's bytes become an ``Exchange`` (parse, project, session, thread);
- ``prepare``: the session is marked busy (background work of the session waits) and the
  request stages run (they may edit the request);
- ``finish``: the session is idle again, and once the client has its answer the response
  stages run in the background on one ``Outcome`` built the same way for both transports — the
  exact bytes sent upstream (``sent``), the answer's raw bytes (``chunks``), the assembled
  message, the verdict.

Two copies of this lifecycle (one per transport) drifted once: the WebSocket copy never filled
``sent``/``chunks``, so shadow memory never saw a Codex session's prefix and never forked it,
and it never marked the session busy. Keeping one copy is the fix.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ember.config import Settings
from ember.exchange import Exchange, Outcome
from ember.protocols.assemble import assemble
from ember.protocols.base import AssembledMessage, ProtocolAdapter
from ember.proxy.delivery import Delivered
from ember.proxy.intake import build_exchange
from ember.proxy.pipeline import Pipeline
from ember.proxy.reach import Reachability
from ember.proxy.verdict import judge
from ember.sessions import SessionRegistry

log = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], Awaitable[None]]


class ExchangeFlow:
    """The lifecycle above, with the response stages it has running (``drain`` waits)."""

    def __init__(self, settings: Settings, sessions: SessionRegistry, pipeline: Pipeline) -> None:
        self.settings = settings
        self.sessions = sessions
        self.pipeline = pipeline
        self.reach = Reachability()
        self._finishing: set[asyncio.Task[None]] = set()

    def open(
        self, adapter: ProtocolAdapter, path: str, query: str, headers: dict[str, str], body: bytes
    ) -> Exchange:
        """Raises ``ProtocolError`` (answer 400) for a body that is not a JSON object or is
        nested past ``max_json_depth``."""
        return build_exchange(adapter, path, query, headers, body, self.settings, self.sessions)

    async def prepare(self, ex: Exchange, *, edit: bool = True) -> None:
        """Mark the session busy, then run the request stages (``edit=False``: a message with
        nothing for them to edit, e.g. a ``response.append``). Every ``prepare`` must be
        followed by exactly one ``finish``."""
        self.sessions.begin(ex.session_id)
        if edit:
            await self.pipeline.run_request(ex)

    def announcing(self, ex: Exchange, send: Send) -> Send:
        """``send`` that tells the stages the answer is complete (``Pipeline.answered``) just
        before its last message goes to the client: whatever a client has received in full,
        the answer journal has (``store.journal``), even when the proxy is killed next."""

        async def last_told(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.pipeline.answered(ex)
            await send(message)

        return last_told

    def finish(self, ex: Exchange, delivered: Delivered) -> None:
        """The client has its answer (or the exchange failed): the session is idle, and the
        response stages run in the background (told first of the answer's end, when no
        ``announcing`` send did)."""
        self.pipeline.answered(ex)
        self.sessions.end(ex.session_id)
        family = ex.adapter.name.split("_")[0]  # anthropic, openai (both APIs), gemini
        url = self.settings.provider_url(ex.adapter.name, ex.path)
        self.reach.record(family, url, delivered.kind, delivered.error)
        latency = (time.perf_counter() - ex.started) * 1000
        task = asyncio.ensure_future(self._respond(ex, delivered, latency))
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)

    def abandon(self, ex: Exchange) -> None:
        """The exchange broke off inside ember (a bug, or the proxy stopping): the session is
        idle again; no response stage runs on a half-known outcome."""
        self.sessions.end(ex.session_id)

    async def _respond(self, ex: Exchange, d: Delivered, latency_ms: float) -> None:
        outcome = Outcome(
            status=d.status,
            kind=d.kind,
            message=None,
            streamed=d.streamed,
            latency_ms=latency_ms,
            ttfb_ms=d.ttfb_ms,
            error=d.error,
            hidden_rounds=len(d.hidden),
            sent=d.sent,
            chunks=d.chunks,
            hidden=d.hidden,
            sent_value=d.sent_value,
        )
        try:
            outcome.message = _assemble(ex.adapter, d)
        except Exception:
            log.exception("could not assemble the answer of session %s", ex.session_id)
        await self.pipeline.run_response(ex, judge(outcome))

    @property
    def pending(self) -> int:
        """Response stages still running."""
        return len(self._finishing)

    async def drain(self) -> None:
        """Wait until every answered exchange's response stages have run."""
        while self._finishing:
            await asyncio.wait(set(self._finishing))

    async def wait(self, timeout: float) -> None:
        """``drain``, for at most ``timeout`` seconds (a stopping proxy)."""
        if self._finishing:
            await asyncio.wait(set(self._finishing), timeout=timeout)


def _assemble(adapter: ProtocolAdapter, d: Delivered) -> AssembledMessage | None:
    if d.framing == "http":
        return assemble(adapter, d.chunks, d.streamed)
    if not d.chunks:
        return None
    assembler = adapter.assembler()
    for chunk in d.chunks:
        assembler.feed(None, chunk.decode("utf-8", errors="replace"))
    return assembler.result()

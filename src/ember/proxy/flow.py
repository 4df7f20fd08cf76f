"""One exchange's lifecycle, the same for every transport (HTTP POST and Responses over
WebSocket).

A transport only moves bytes (``proxy.transport``); everything a feature sees of an exchange
goes through here:
- ``admit``: the client's bytes become an ``Exchange`` (parse, project, session, thread), or
  the client is answered 400 when ember cannot read them;
- ``prepare``: the session is marked busy (background work of the session waits) and the
  request stages run (they may edit the request). It returns the exchange's ``Turn``, or None
  when a stage refused the request: then ember answered it and the turn is already finished;
- ``Turn.finish``: the session is idle again, and once the client has its answer the response
  stages run in the background on one ``Outcome`` built the same way for both transports — the
  exact bytes sent upstream (``sent``), the answer's raw bytes (``chunks``), the assembled
  message, the verdict. ``Turn.abandon`` instead when the exchange broke off inside ember.

A turn ends exactly once: a second end raises, and a turn used as a context manager is
abandoned when its block leaves without ending it (an exception, a cancelled task). A session
whose turn never ended would stay busy, and its background work (shadow memory) would wait
for it forever.

One lifecycle serves both transports: a copy per transport can forget a step, e.g. filling
``sent``/``chunks`` (without them shadow memory never sees a Codex session's prefix and never
forks it) or marking the session busy.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from ember.config import Settings
from ember.errors import ProtocolError
from ember.exchange import Exchange, Outcome
from ember.protocols.assemble import assemble
from ember.protocols.base import AssembledMessage, ProtocolAdapter
from ember.proxy.delivery import Delivered, answered_refusal
from ember.proxy.intake import build_exchange
from ember.proxy.pipeline import Pipeline
from ember.proxy.reach import Reachability
from ember.proxy.transport import Transport
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

    async def admit(
        self,
        transport: Transport,
        adapter: ProtocolAdapter,
        path: str,
        query: str,
        headers: dict[str, str],
        body: bytes,
    ) -> Exchange | None:
        """The request as an ``Exchange``; None once the client was answered 400 for a body
        that is not a JSON object or is nested past ``max_json_depth``."""
        try:
            return build_exchange(adapter, path, query, headers, body, self.settings, self.sessions)
        except ProtocolError as exc:
            await transport.error(400, f"ember: {exc}")
            return None

    async def prepare(
        self, ex: Exchange, transport: Transport, *, edit: bool = True
    ) -> Turn | None:
        """Mark the session busy, then run the request stages (``edit=False``: a message with
        nothing for them to edit, e.g. a ``response.append``). None when a stage refused the
        request: the client has the refusal (its status, in the protocol's shape, and not to be
        retried) and the turn is finished, accounted like any answer with the provider never
        asked. Otherwise the turn, to finish once the client has the answer."""
        turn = Turn(self, ex)
        try:
            if edit:
                await self.pipeline.run_request(ex)
            refusal = ex.refusal
            if refusal is None:
                return turn
            body = await transport.error(
                refusal.status, refusal.message, retry=False, retry_after=refusal.retry_after
            )
        except BaseException:
            turn.abandon()
            raise
        turn.finish(answered_refusal(refusal, body, transport.framing))
        return None

    def announcing(self, ex: Exchange, send: Send) -> Send:
        """``send`` that tells the stages the answer is complete (``Pipeline.answered``) just
        before its last message goes to the client: whatever a client has received in full,
        the answer journal has (``store.journal``), even when the proxy is killed next."""

        async def last_told(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.pipeline.answered(ex)
            await send(message)

        return last_told

    def _finish(self, ex: Exchange, delivered: Delivered) -> None:
        """The client has its answer (or the exchange failed): the session is idle, and the
        response stages run in the background (told first of the answer's end, when no
        ``announcing`` send did)."""
        self.pipeline.answered(ex)
        self.sessions.end(ex.session_id)
        url = ex.adapter.upstream_url(self.settings, ex.path)
        self.reach.record(ex.adapter.family, url, delivered.kind, delivered.error)
        latency = (time.perf_counter() - ex.started) * 1000
        task = asyncio.ensure_future(self._respond(ex, delivered, latency))
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)

    def _abandon(self, ex: Exchange) -> None:
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


class Turn:
    """One prepared exchange, from ``ExchangeFlow.prepare`` until exactly one ``finish`` or
    ``abandon``. As a context manager (``with turn:``) it is abandoned when the block leaves
    without having ended it."""

    __slots__ = ("_ended", "ex", "flow")

    def __init__(self, flow: ExchangeFlow, ex: Exchange) -> None:
        self.flow = flow
        self.ex = ex
        self._ended = False
        flow.sessions.begin(ex.session_id)

    @property
    def ended(self) -> bool:
        return self._ended

    def announcing(self, send: Send) -> Send:
        """``ExchangeFlow.announcing`` for this exchange."""
        return self.flow.announcing(self.ex, send)

    def finish(self, delivered: Delivered) -> None:
        """The client has its answer, or the exchange failed: the session is idle, and the
        response stages run on ``delivered`` in the background."""
        self._end()
        self.flow._finish(self.ex, delivered)

    def abandon(self) -> None:
        """The exchange broke off inside ember (a bug, or the proxy stopping): the session is
        idle again; no response stage runs on a half-known outcome."""
        self._end()
        self.flow._abandon(self.ex)

    def _end(self) -> None:
        if self._ended:
            raise RuntimeError(f"the exchange of session {self.ex.session_id} ended twice")
        self._ended = True

    def __enter__(self) -> Turn:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._ended:
            if kind is None:
                log.error("an exchange of session %s was left unfinished", self.ex.session_id)
            self.abandon()


def _assemble(adapter: ProtocolAdapter, d: Delivered) -> AssembledMessage | None:
    if d.framing == "http":
        return assemble(adapter, d.chunks, d.streamed)
    if not d.chunks:
        return None
    assembler = adapter.assembler()
    for chunk in d.chunks:
        assembler.feed(None, chunk.decode("utf-8", errors="replace"))
    return assembler.result()

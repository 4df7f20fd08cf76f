"""The extension point: an ordered list of stages around each exchange.

A stage sees every request before it goes upstream (``on_request``: read the request, edit it
through the adapter) and every outcome after the client has its answer (``on_response``:
record, learn, schedule work). Shaping, memory injection, shadow recording and accounting are all
stages; the HTTP handlers never change when a feature is added.

Fail open: a stage that raises is logged and skipped, and any edit it made before raising is
rolled back, so a bug in memory or shaping never breaks or corrupts the user's request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ember.config import Settings
from ember.project import ProjectRef
from ember.protocols.base import AssembledMessage, ProtocolAdapter
from ember.protocols.jsonedit import JsonDoc
from ember.store.registry import Storage
from ember.threads import Thread

if TYPE_CHECKING:
    from ember.proxy.owned import OwnedTools

log = logging.getLogger(__name__)

#: How an exchange ended. ``ok``: a whole answer. ``upstream_error``: the provider answered
#: with an error (an error status, or a 200 JSON body holding one). ``stream_error``: an error
#: event inside a stream that had begun with 200. ``cut``: a stream or body that ended before
#: its final event, whether the connection broke or closed cleanly. ``cancelled``: the client
#: went away. ``timeout`` / ``unreachable``: no answer from the provider at all.
OutcomeKind = Literal[
    "ok", "upstream_error", "stream_error", "cut", "cancelled", "timeout", "unreachable"
]


@dataclass
class Exchange:
    """One client request on its way through ember. ``doc`` holds the body to send."""

    adapter: ProtocolAdapter
    path: str
    query: str
    headers: dict[str, str]
    doc: JsonDoc
    settings: Settings
    session_id: str
    project: ProjectRef | None
    started: float = field(default_factory=time.perf_counter)
    wall_started: float = field(default_factory=time.time)
    #: scratch space for stages, keyed by stage name
    state: dict[str, Any] = field(default_factory=dict)
    #: tools ember offers the model and runs itself (set by a stage that also added their
    #: definitions to the request); the answer is then buffered until no owned call is left
    owned_tools: OwnedTools | None = None
    #: which conversation of the session this is (``ember.threads``); None counts as main
    thread: Thread | None = None

    @property
    def is_main_thread(self) -> bool:
        """The user's own conversation: where shaping and memory act (never a title request,
        a compaction's summary or a sub-agent)."""
        return self.thread is None or self.thread.is_main

    @property
    def body(self) -> Any:
        return self.doc.value

    @property
    def model(self) -> str | None:
        return self.adapter.model(self.doc.value)

    @property
    def stream(self) -> bool:
        return self.adapter.is_stream(self.doc.value)


@dataclass
class Outcome:
    """What happened upstream. ``message`` is None when no answer was produced."""

    status: int
    kind: OutcomeKind
    message: AssembledMessage | None
    streamed: bool
    latency_ms: float
    ttfb_ms: float | None = None
    error: str | None = None
    #: rounds with ember-owned tool calls that ran before the answer the client got
    hidden_rounds: int = 0


@dataclass(frozen=True)
class Services:
    """What the app hands every stage when it starts."""

    settings: Settings
    storage: Storage


class Stage:
    """Base class: override any hook. ``name`` keys the stage's ``Exchange.state`` slot.

    ``start`` runs once when the app starts serving (background tasks begin here, never in
    ``__init__``: a stage may be built long before an event loop exists); ``close`` once when
    it stops, before the databases are closed — what a stage still holds is flushed there.
    """

    name = "stage"

    async def start(self, services: Services) -> None:
        return None

    async def settle(self) -> None:
        """Finish what is held back for later (``ProxyApp.drain``: tests, the demo)."""
        return None

    async def on_request(self, ex: Exchange) -> None:
        return None

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        return None

    async def close(self) -> None:
        return None


class Pipeline:
    def __init__(self, stages: Sequence[Stage] = ()) -> None:
        self.stages = list(stages)

    async def run_request(self, ex: Exchange) -> None:
        for stage in self.stages:
            mark = ex.doc.checkpoint()
            try:
                await stage.on_request(ex)
            except Exception:
                ex.doc.rollback(mark)
                log.exception("stage %s failed on request; request continues unchanged", stage.name)

    async def run_response(self, ex: Exchange, outcome: Outcome) -> None:
        for stage in self.stages:
            try:
                await stage.on_response(ex, outcome)
            except Exception:
                log.exception("stage %s failed on response", stage.name)

    async def start(self, services: Services) -> None:
        for stage in self.stages:
            try:
                await stage.start(services)
            except Exception:
                log.exception(
                    "stage %s failed to start; it stays in, and may do nothing", stage.name
                )

    async def settle(self) -> None:
        for stage in self.stages:
            try:
                await stage.settle()
            except Exception:
                log.exception("stage %s failed to settle", stage.name)

    async def close(self) -> None:
        for stage in self.stages:
            try:
                await stage.close()
            except Exception:
                log.exception("stage %s failed to close", stage.name)

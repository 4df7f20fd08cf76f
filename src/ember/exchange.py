"""The stage interface: what every feature sees of an exchange, and what the app gives it.

It sits below both the proxy (which runs stages) and the features (which are stages): no
feature imports ``ember.proxy``, and the proxy imports no feature — the list of stages is
composed where the app is built (``ember.compose``). A feature that calls upstream on its own
(shadow memory, the steward) gets everything it needs from ``Services``: the upstream client
as one method over plain values, the provider URLs, the storage, the session registry and a
task set of its own, so its background work never holds up serving or shutdown — and the
app's metrics registry, where a stage registers what it counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ember.config import Settings
from ember.project import ProjectRef
from ember.protocols.base import AssembledMessage, ProtocolAdapter, Usage
from ember.protocols.jsonedit import JsonDoc
from ember.threads import Thread

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ember.protocols.tooling import ToolSpec
    from ember.sessions import SessionRegistry
    from ember.store.registry import Storage
    from ember.transcript_recorder import Transcripts

log = logging.getLogger(__name__)

#: The public part (README, Adding a feature); the rest is internal.
__all__ = ["Exchange", "Outcome", "Services", "Stage", "Stopping"]

#: How an exchange ended. ``ok``: a whole answer. ``upstream_error``: the provider answered
#: with an error (an error status, or a 200 JSON body holding one). ``stream_error``: an error
#: event inside a stream that had begun with 200. ``cut``: a stream or body that ended before
#: its final event, whether the connection broke or closed cleanly. ``cancelled``: the client
#: went away. ``timeout`` / ``unreachable``: no answer from the provider at all. ``refused``:
#: ember answered itself and never asked the provider (``Exchange.refusal``).
OutcomeKind = Literal[
    "ok", "upstream_error", "stream_error", "cut", "cancelled", "timeout", "unreachable", "refused"
]


@dataclass(frozen=True)
class Refusal:
    """A request ember answers itself with an error, in the protocol's own shape, instead of
    forwarding it (a project over the spend limit its user set). ``retry_after``: seconds
    until asking again can succeed. Clients are told not to retry (``x-should-retry:
    false``): an SDK retrying a refusal only hides the message from the user."""

    status: int
    message: str
    retry_after: float | None = None


class OwnedTools(Protocol):
    """A set of tools ember offers the model and runs itself."""

    @property
    def specs(self) -> Sequence[ToolSpec]: ...

    async def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        """The tool's result text and whether it is an error; must not raise."""
        ...


@dataclass
class Exchange:
    """One client request on its way through ember. ``doc`` holds the body to send."""

    adapter: ProtocolAdapter
    path: str
    query: str
    headers: dict[str, str]
    doc: JsonDoc
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
    #: a continuation (``previous_response_id``) of a response whose input held no system or
    #: developer message: it inherits no system prompt, so its own leading developer messages
    #: are where ember's block goes (Codex's default model prewarms a socket with an empty
    #: input and sends its prompt with the turn). Set by the WebSocket session, which knows.
    inherits_no_system: bool = False
    #: the request came over a WebSocket (Codex's Responses socket): the answer is relayed
    #: event by event, so tools ember runs itself (``owned_tools``) cannot be answered there
    over_socket: bool = False
    #: set by a request stage: ember answers with this error, the provider is never asked and
    #: the later request stages do not run
    refusal: Refusal | None = None
    #: the stages were told the answer is complete (``Stage.on_answered``)
    answered: bool = False
    #: what the stages did to this exchange, by stage name, kept with its accounting row
    #: (``exchanges.notes``, JSON) for the dashboard: small values, never content or keys —
    #: shaping's verbosity level, how many memories were injected and their bytes
    notes: dict[str, Any] = field(default_factory=dict)

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


@dataclass(frozen=True)
class HiddenRound:
    """One upstream call ember made inside an exchange that the client never saw (a round of
    ember-owned tool calls): accounted on its own row, with its origin, so the session's
    totals stay what the client itself asked for."""

    model: str | None
    usage: Usage | None


@dataclass
class Outcome:
    """What happened upstream. ``message`` is None when no answer was produced.

    ``sent`` is the exact body that went upstream for the answer the client got (after every
    edit of ember's; in tool mode, the last round's), ``chunks`` the raw bytes of that answer:
    a feature that replays the exchange (shadow memory) needs these bytes, not a rebuild. Both
    are filled on every transport (``ember.proxy.flow``). A Responses continuation over
    WebSocket (``previous_response_id`` of the same socket, new items only) has no bytes that
    stand alone: ``sent`` is then its HTTP equivalent, the whole history as one request
    (OpenAI caches by tokens, not bytes, so it reads the same cache), and ``sent_value`` that
    request parsed — the conversation as the provider saw it, where ``Exchange.body`` holds only
    the new items.
    """

    status: int
    kind: OutcomeKind
    message: AssembledMessage | None
    streamed: bool
    latency_ms: float
    ttfb_ms: float | None = None
    error: str | None = None
    #: rounds with ember-owned tool calls that ran before the answer the client got
    hidden_rounds: int = 0
    sent: bytes = b""
    chunks: list[bytes] = field(default_factory=list)
    hidden: list[HiddenRound] = field(default_factory=list)
    sent_value: Any = None

    def conversation(self, ex: Exchange) -> Any:
        """The request as the provider saw it, whole: ``sent_value`` when the transport
        rebuilt it, else the exchange's body."""
        return self.sent_value if self.sent_value is not None else ex.body


@dataclass
class UpstreamReply:
    """A provider's answer as plain values: status, headers and the body as it arrives."""

    status: int
    headers: list[tuple[str, str]]
    chunks: AsyncIterator[bytes]


class UpstreamClient(Protocol):
    """Calling the provider without any server in the picture (shadow memory, the steward)."""

    def call(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes
    ) -> contextlib.AbstractAsyncContextManager[UpstreamReply]:
        """Raises ``UpstreamError``/``UpstreamTimeout`` when the provider cannot be reached."""
        ...


class TaskSet:
    """Background work of the features, apart from serving: never awaited by a drain or a
    shutdown (a pending shadow run must not hold the proxy up), cancelled when the app stops."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    async def cancel_all(self) -> None:
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t


UrlFor = Callable[[ProtocolAdapter, str, str], str]


class OwnUpstream(UpstreamClient, Protocol):
    """An upstream client a command opened for itself, and closes."""

    async def close(self) -> None: ...


@dataclass(frozen=True)
class CommandServices:
    """What the CLI hands a feature's commands (``click``'s context object): a command that
    calls the provider itself (``ember shadow compare --semantic``) opens ember's own client
    to the providers of its settings here, never by importing the proxy."""

    upstream: Callable[[Settings], OwnUpstream]
    #: what one feature's command takes from another, joined by the CLI so neither feature
    #: imports the other: ``ember learn --verbosity`` hands learn's log scan to shaping's
    #: verbosity learning (``ember.cli.learn_verbosity``); None outside ``ember``
    learn_verbosity: Callable[..., None] | None = None


@dataclass(frozen=True)
class Services:
    """What the app hands every stage when it starts: all of it, always (a stage never checks
    for a missing member; a test builds the same kernel pieces the proxy does)."""

    settings: Settings
    storage: Storage
    #: the live sessions and their threads
    sessions: SessionRegistry
    #: the provider, for calls of ember's own (shadow memory, the steward)
    upstream: UpstreamClient
    #: the provider URL for an adapter, a path and a query string
    url_for: UrlFor
    #: the user's threads, recorded once per exchange for every feature that reads them
    transcripts: Transcripts
    #: the app's own Prometheus registry (``GET /metrics``): a stage registers its metrics
    #: here in ``start``, never in prometheus_client's global one (``ember.metrics``)
    metrics: CollectorRegistry
    #: the features' background work, cancelled when the app stops
    tasks: TaskSet = field(default_factory=TaskSet)


@dataclass(frozen=True)
class Stopping:
    """A proxy on its way out: how long stages may still work (``wind_down``), and whether
    the user asked to skip that (a second Ctrl-C)."""

    seconds: float
    skipped: Callable[[], bool] = lambda: False
    #: set when the proxy keeps serving while stages finish their work (the proxy ``ember
    #: wrap`` started, once its client exited): a stage says at once how many sessions it is
    #: still reading, which the wrap prints
    reading: Callable[[int], None] | None = None


class Stage:
    """Base class: override any hook. ``name`` keys the stage's ``Exchange.state`` slot.

    ``start`` runs once when the app starts serving (background tasks begin here, never in
    ``__init__``: a stage may be built long before an event loop exists); ``wind_down`` once
    when it stops, after the last answer, while upstream calls can still be made (bounded by
    ``Stopping``); ``close`` last, before the databases are closed — what a stage still holds
    is flushed there.
    """

    name = "stage"
    #: Why this stage needs requests to come over HTTP, or None. Set, the proxy refuses a
    #: WebSocket upgrade with it (a 426: Codex falls back to HTTP at once) instead of relaying
    #: a stream the stage could not work on — memory tools run inside the HTTP exchange only.
    http_only: str | None = None
    #: When its ``on_response`` runs: stages run by this number, then in pipeline order. Below 0
    #: for a stage that writes down what the client was answered (accounting's row, the
    #: transcript): queued, and journaled, at once rather than after the other stages' work
    #: on the answer — seconds under load, and a proxy killed meanwhile lost those writes.
    response_order: int = 0

    async def start(self, services: Services) -> None:
        return None

    async def settle(self) -> None:
        """Finish what is held back for later (``ProxyApp.drain``: tests, the demo)."""
        return None

    async def on_request(self, ex: Exchange) -> None:
        return None

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        return None

    def on_answered(self, ex: Exchange) -> None:
        """The client is about to have its whole answer (its last byte is next), or the
        exchange ended without one: once per exchange, before ``on_response``, on the event
        loop and never awaited — only a few microseconds of work belong here (the answer
        journal, ``accounting``)."""
        return None

    async def wind_down(self, stopping: Stopping) -> None:
        return None

    async def close(self) -> None:
        return None

"""Library mode: shadow memory for an agent framework that calls the model itself (no proxy).

The framework tells the library what the proxy would have seen, and the same machinery runs
(``ember.shadow.observe``: transcript, prefix, triggers, hot and cold runs, evidence checks,
promotion into the project's memories):

- ``note(...)`` after each model call of a thread: the exact request bytes it sent, the answer
  it got (the raw JSON or SSE bytes, or the parsed JSON) and the request headers (the
  credentials are kept in memory for the provider's cache TTL only, never written). A turn
  that ended fires a shadow run after a short debounce;
- ``user_message(...)`` when the user speaks (or ``request_started(...)`` before any request
  of the thread): queued shadow work is dropped and a running shadow call aborted at once;
- ``trigger(...)`` (turn ended, idle, manual; debounced) or ``await run_now(...)``.

The hot shadow turn replays the noted request byte for byte, so it is read from the provider's
cache. Keep ``memory_propose_tool(protocol)`` in the tool list of every turn (the shadow turn
answers through it, and the tools stay as cached) and ask ``guard_tool_call(...)`` before
running a call: outside a shadow turn ``memory_propose`` is refused with a tool result saying
why. ``ember.compose.shadow_library(settings)`` builds a library with ember's own HTTP client,
storage and memory stores.

Each ``(session_id, thread)`` is its own shadow: its own transcript lineage, prefix and runs
(evidence must come from the same thread). Note only threads whose facts matter — the user's
conversation, a sub-agent — never side requests (titles, summaries).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from prometheus_client import CollectorRegistry

# Library mode is an entry point: a program that imports this module and calls
# ``ember.config.load_settings()`` (README) gets the registered features' settings and
# tables, which loading the composition root installs (``ember.installed``).
import ember.compose  # noqa: F401
from ember.config import Settings
from ember.exchange import OutcomeKind, TaskSet, UpstreamClient
from ember.facts import MemoryOpener
from ember.framework import LibraryError, ProjectLike, adapter_for, project_ref, request_bytes
from ember.project import ProjectRef
from ember.protocols.assemble import assemble
from ember.protocols.base import AssembledMessage, ProtocolAdapter
from ember.protocols.plain import PATHS
from ember.sessions import SessionRegistry
from ember.shadow.models import Trigger
from ember.shadow.observe import Answered, ShadowCore, forwarded
from ember.shadow.policy import DEBOUNCE_SECONDS, turn_ended
from ember.shadow.propose import (
    MEMORY_PROPOSE,
    guard_tool_call,
    memory_propose_tool,
    refusal_result,
    tool_call_refusal,
)
from ember.shadow.runner import RunRecord
from ember.shadow.settings import ShadowSettings
from ember.store.accounting import ExchangeRecord
from ember.store.registry import Storage, storage_for
from ember.transcript_recorder import Transcripts

__all__ = [
    "MEMORY_PROPOSE",
    "LibraryError",
    "Noted",
    "ShadowLibrary",
    "guard_tool_call",
    "memory_propose_tool",
    "refusal_result",
    "tool_call_refusal",
]

MAIN_THREAD = "main"
Headers = Mapping[str, str] | Sequence[tuple[str, str]]
Answer = bytes | str | Mapping[str, Any] | AssembledMessage


@dataclass(frozen=True)
class Noted:
    """What ``note`` recorded: the shadow's key for the thread, the answer as assembled, and
    whether the answer ended the turn (a shadow run is then on its way)."""

    key: str
    answer: AssembledMessage | None
    turn_ended: bool


def thread_key(session_id: str, thread: str = MAIN_THREAD) -> str:
    """The shadow's session id for a framework's thread (the main thread: the session id)."""
    if not session_id:
        raise LibraryError("session_id is empty: pass the framework's id of the conversation")
    return session_id if thread == MAIN_THREAD else f"{session_id}/{thread}"


def _assembled(adapter: ProtocolAdapter, answer: Answer | None) -> AssembledMessage | None:
    """The answer as ember assembles it: raw bytes (a JSON body, or an SSE stream as it came),
    a parsed JSON body, or an already assembled message."""
    if answer is None or isinstance(answer, AssembledMessage):
        return answer
    if isinstance(answer, Mapping):
        return adapter.parse_response(dict(answer))
    raw = answer.encode() if isinstance(answer, str) else bytes(answer)
    head = raw.lstrip()[:6]
    return assemble(adapter, [raw], head.startswith((b"event:", b"data:")))


def _kind(status: int, answer: AssembledMessage | None) -> OutcomeKind:
    if status >= 400 or answer is None:
        return "upstream_error"
    if answer.error is not None:
        return "stream_error"
    return "ok" if answer.complete else "cut"


class ShadowLibrary:
    """Shadow memory driven by a framework; see the module. Use it on one event loop, inside
    ``async with`` (or ``start``/``close``)."""

    def __init__(
        self,
        settings: Settings,
        upstream: UpstreamClient,
        *,
        storage: Storage | None = None,
        memories: MemoryOpener | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        if settings.section(ShadowSettings).shadow == "off":
            raise LibraryError("shadow memory is off (EMBER_SHADOW=off): set primary or compare")
        self.settings = settings
        self.upstream = upstream
        self._own_storage = storage is None
        self.storage = storage or storage_for(settings)
        self.sessions = SessionRegistry()
        self.tasks = TaskSet()
        #: shadow memory's metrics (``ember.shadow.metrics``), in a registry of the library's
        #: own: a framework serves them with ``prometheus_client.generate_latest(metrics)``
        self.metrics = CollectorRegistry()
        transcripts = Transcripts(self.storage, settings.home, self.sessions)
        self.core = ShadowCore(
            settings,
            self.storage,
            upstream,
            self._url,
            self.sessions,
            self.tasks,
            transcripts,
            memories,
            self.metrics,
        )
        self._on_close = on_close
        self._started = False
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> ShadowLibrary:
        if not self._started:
            self._started = True
            self.core.start()
        return self

    async def close(self) -> None:
        """Cancel shadow work still going (a cancelled run is recorded as such), write what is
        queued, close what the library opened. Closing twice is closing once."""
        if self._closed:
            return
        self._closed = True
        self.core.close()
        await self.tasks.cancel_all()
        await asyncio.to_thread(self.storage.flush, 10)
        if self._on_close is not None:
            await self._on_close()
        if self._own_storage:
            await asyncio.to_thread(self.storage.close)

    async def __aenter__(self) -> ShadowLibrary:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _url(self, adapter: ProtocolAdapter, path: str, query: str) -> str:
        """The provider URL of ``settings`` (``anthropic_url``, ``openai_url``, ``gemini_url``)
        for a call, as the call's adapter places it."""
        return adapter.upstream_url(self.settings, path, query)

    # -- the API -----------------------------------------------------------------------------

    def request_started(
        self, session_id: str, project: ProjectLike, protocol: str, thread: str = MAIN_THREAD
    ) -> int:
        """The thread is about to call the model: its shadow work is cancelled and no run
        starts until ``note`` says the request is over. Returns the request's number, for
        ``note(..., request_number=...)`` (answers noted out of order are then told apart)."""
        key = thread_key(session_id, thread)
        ref = project_ref(project, self.settings.project_identity)
        number = self.core.begin(key, ref, adapter_for(protocol).name)
        self.sessions.begin(key)
        return number

    def user_message(self, session_id: str, thread: str = MAIN_THREAD) -> None:
        """The user spoke: queued shadow work is dropped, a running shadow call aborted at once
        (its run is recorded ``cancelled``, with no proposal) and the prefix forgotten."""
        self.core.service.cancel(thread_key(session_id, thread))

    cancel = user_message

    async def note(
        self,
        session_id: str,
        *,
        project: ProjectLike,
        protocol: str,
        request: bytes | str | Mapping[str, Any],
        answer: Answer | None,
        headers: Headers = (),
        status: int = 200,
        thread: str = MAIN_THREAD,
        request_number: int | None = None,
        path: str | None = None,
    ) -> Noted:
        """Record one model call of the thread: ``request`` the exact body sent (bytes, for a
        byte-identical replay), ``answer`` what came back, ``headers`` the request's headers
        (auth, version, betas: held in memory for the cache TTL only). Also accounts the call
        as the session's own spend (the shadow's spend cap is a share of it)."""
        adapter = adapter_for(protocol)
        ref = project_ref(project, self.settings.project_identity)
        key = thread_key(session_id, thread)
        sent, body = request_bytes(request)
        assembled = _assembled(adapter, answer)
        if request_number is None:
            request_number = self.core.begin(key, ref, adapter.name)
        self.sessions.end(key)
        kind = _kind(status, assembled)
        model = (assembled.model if assembled is not None else None) or adapter.model(body)
        self._account(key, ref, adapter, model, assembled, status, kind, thread)
        tools = adapter.tool_names(body)
        await self.core.answered(
            Answered(
                session_id=key,
                project=ref,
                adapter=adapter,
                path=path or PATHS[adapter.name],
                query="",
                headers=forwarded(headers),
                body=body,
                sent=sent,
                answer=assembled,
                kind=kind,
                seq=request_number,
                propose_tool=MEMORY_PROPOSE if MEMORY_PROPOSE in tools else None,
            )
        )
        return Noted(key, assembled, kind == "ok" and turn_ended(assembled))

    def trigger(
        self,
        session_id: str,
        reason: Trigger = "manual",
        *,
        thread: str = MAIN_THREAD,
        delay: float = DEBOUNCE_SECONDS,
    ) -> None:
        """Ask for a shadow run of the thread after ``delay`` (a user message before then
        drops it). Nothing happens for a thread nothing was noted for."""
        self.core.service.trigger(thread_key(session_id, thread), reason, delay=delay)

    async def run_now(self, session_id: str, thread: str = MAIN_THREAD) -> RunRecord | None:
        """Run the thread's shadow at once and wait for it; None when nothing ran (nothing
        noted, nothing unread, a request in flight, backed off, or cancelled)."""
        key = thread_key(session_id, thread)
        service = self.core.service
        st = service.state(key)
        if st is None or st.generation is None:
            return None
        service.trigger(key, "manual", delay=0.0)
        service.kick(key)
        task = st.task
        if task is None:
            return None
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
            return None
        return st.last_record

    # -- accounting ---------------------------------------------------------------------------

    def _account(
        self,
        key: str,
        project: ProjectRef,
        adapter: ProtocolAdapter,
        model: str | None,
        answer: AssembledMessage | None,
        status: int,
        kind: OutcomeKind,
        thread: str,
    ) -> None:
        """The framework's own call, as the proxy's accounting would have written it."""
        prices = self.settings.price_table()
        usage = answer.usage if answer is not None else None
        record = ExchangeRecord(
            ts=time.time(),
            session_id=key,
            project=project.identity,
            protocol=adapter.name,
            model=model,
            status=status,
            outcome=kind,
            stream=False,
            usage=usage,
            cost_usd=prices.cost(model, usage),
            price_snapshot=prices.snapshot,
            latency_ms=0.0,
            ttfb_ms=None,
            thread=key,
            thread_kind="main" if thread == MAIN_THREAD else "subagent",
            origin="client",
        )
        self.core.database(project).submit(record.insert, label="accounting:library")


def database_path(settings: Settings, project: ProjectLike) -> Path:
    """Where the library writes a project's transcript, runs and proposals."""
    return project_ref(project, settings.project_identity).db_path(settings.home)

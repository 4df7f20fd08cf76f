"""Shadow memory wired up, and what it does with one answered request of a session's thread.

Shared by the proxy's stage (``ember.shadow.stage``) and library mode (``ember.shadow.library``):
both see the same thing — a request of the user's thread, the exact bytes that went upstream and
the answer — and must do the same with it, or the two modes drift apart:
- ``begin``: a new request of the thread (a user message, or the agent going on) makes the
  recorded prefix stale: queued and running shadow work is cancelled at once;
- ``answered``/``noted``: once the request's new messages and the answer are in the transcript
  (``ember.transcript_recorder``, the kernel's: the proxy records each exchange once for every
  feature), the prefix is noted (the exact bytes, the answer, the credentials: in memory, for
  the cache TTL) and the triggers fire: a finished turn, a failed one, a restarted history.

Answers are handled after the client has them, in any order: an answer older than one already
recorded is skipped by the transcript, and a prefix older than one already noted is not noted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from ember.config import Settings
from ember.errors import StorageUnavailable
from ember.exchange import OutcomeKind, TaskSet, UpstreamClient, UrlFor
from ember.facts import MemoryOpener
from ember.project import ProjectRef
from ember.protocols import ANTHROPIC, BY_NAME
from ember.protocols.base import AssembledMessage, ProtocolAdapter
from ember.sessions import SessionRegistry
from ember.shadow import backlog, cursors, runs
from ember.shadow.metrics import ShadowMetrics
from ember.shadow.models import FactIn
from ember.shadow.policy import turn_ended
from ember.shadow.prefix import Prefix, PrefixBook
from ember.shadow.question import Remembered
from ember.shadow.runner import RunRecord, RunRequest, ShadowRunner, memories_for_promotion
from ember.shadow.service import SessionShadow, ShadowService
from ember.shadow.settings import ShadowSettings
from ember.shadow.spend_share import NOTHING
from ember.shadow.steward import Steward
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.ops import replayable
from ember.store.registry import Storage
from ember.store.transcript_rows import by_ids
from ember.transcript_recorder import Opened, Recorded, Transcripts, Turn

#: Request headers that never belong to a background call (hop-by-hop, framing, and a
#: WebSocket handshake's own: a shadow call is an HTTP POST even when its session spoke over a
#: socket, and ``upgrade`` on a POST asks the server to switch protocols).
_NOT_FORWARDED = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "transfer-encoding",
        "accept-encoding",
        "upgrade",
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "sec-websocket-protocol",
    }
)
#: How long a session recorded during a store outage waits for its transcript to be placed
#: before shadow memory gives up noting it (its backlog is read cold by a later sweep).
PLACED_WAIT_SECONDS = 600.0
#: Beta flags that only mean something on a socket (``openai-beta``).
_SOCKET_BETAS = ("responses_websockets",)


def forwarded(headers: Mapping[str, str] | Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The client's headers as a background HTTP call sends them (no hop-by-hop, no
    ``x-ember-*``, no socket-only beta flag), names lower-cased."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for key, value in pairs:
        k = key.lower()
        if k in _NOT_FORWARDED or k.startswith("x-ember-"):
            continue
        if k == "openai-beta":
            value = _without_socket_betas(value)
            if not value:
                continue
        out.append((k, value))
    return out


def _without_socket_betas(value: str) -> str:
    flags = [f.strip() for f in value.split(",")]
    return ",".join(f for f in flags if f and not f.startswith(_SOCKET_BETAS))


@dataclass(frozen=True)
class Answered:
    """One answered request of a session's own thread, as the proxy or a framework saw it.

    ``sent`` is the exact body that went upstream (the prefix a hot fork replays: one byte
    different and the provider's cache misses); ``body`` is the same, parsed.
    """

    session_id: str
    project: ProjectRef
    adapter: ProtocolAdapter
    path: str
    query: str
    headers: list[tuple[str, str]]
    body: Any
    sent: bytes
    answer: AssembledMessage | None
    kind: OutcomeKind
    #: the number ``begin`` gave the request (0: not numbered, always recorded)
    seq: int = 0
    #: the resident propose tool the request offered (library mode), else None
    propose_tool: str | None = None


class ShadowCore:
    """The runner, the scheduler and (mode compare) the steward, and the recording of answers."""

    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        upstream: UpstreamClient,
        url_for: UrlFor,
        sessions: SessionRegistry,
        tasks: TaskSet,
        transcripts: Transcripts,
        memories: MemoryOpener | None = None,
        metrics: CollectorRegistry | None = None,
    ) -> None:
        """``metrics``: the registry shadow memory's numbers go to (``ember.shadow.metrics``):
        the proxy's, or library mode's own."""
        self.settings = settings
        self.memories = memories
        counted = ShadowMetrics(metrics)
        self.transcripts = transcripts
        transcripts.before_first_record(_first_touch)
        transcripts.on_opened(_opened)
        promote = self._promote if memories is not None else None
        runner = ShadowRunner(
            settings,
            storage,
            upstream,
            url_for,
            PrefixBook(),
            settings.price_table(),
            promote,
            metrics=counted,
            known=self._known if memories is not None else None,
        )
        self.steward: Steward | None = None
        if settings.section(ShadowSettings).shadow == "compare":
            self.steward = Steward(
                storage,
                upstream,
                url_for,
                settings.price_table(),
                promote=promote,
                metrics=counted,
                known=self._known if memories is not None else None,
            )
        self.service = ShadowService(
            runner,
            sessions,
            tasks,
            idle_seconds=settings.section(ShadowSettings).shadow_idle_seconds,
            tick_seconds=settings.section(ShadowSettings).shadow_tick_seconds,
            after_run=self._steward_after if self.steward is not None else None,
        )
        self._ticker: asyncio.Task[None] | None = None
        #: when each project's forgotten backlogs were last looked for (monotonic seconds)
        self._swept: dict[str, float] = {}
        #: the latest answer of each session whose thread waits to be placed (``noted``)
        self._unplaced: dict[str, Answered] = {}

    def start(self) -> None:
        self._ticker = self.service.tasks.spawn(self.service.tick_forever(), name="shadow-tick")

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()

    @property
    def runner(self) -> ShadowRunner:
        return self.service.runner

    def database(self, project: ProjectRef) -> Database:
        return self.runner.database(project)

    # -- a request, and its answer -----------------------------------------------------------

    def begin(self, session_id: str, project: ProjectRef, protocol: str) -> int:
        """A new request of the thread (numbered by the proxy's transcript, or here in
        library mode): cancel its shadow work; returns the request's number."""
        self.cancel(session_id, project, protocol)
        return self.transcripts.begin(session_id)

    def cancel(self, session_id: str, project: ProjectRef, protocol: str) -> None:
        self.service.cancel(session_id)
        self.service.attach(session_id, project, protocol)

    async def answered(self, a: Answered) -> None:
        """Record the exchange (library mode: nobody recorded it yet), then ``noted``."""
        turn = Turn(a.session_id, a.project, a.adapter, a.body, a.answer, a.seq)
        await self.noted(a, await self.transcripts.record(turn))

    async def noted(self, a: Answered, recorded: Recorded | None) -> None:
        """The exchange is in the transcript (``recorded``; None: a newer request of the
        thread was recorded first, or the store was down and the thread is placed by its own
        writes: noted once they are in, ``_place_later``): note the prefix, fire the trigger
        it calls for."""
        st = self.service.attach(a.session_id, a.project, a.adapter.name)
        if recorded is not None:
            self._handle(a, st, recorded)
        elif self.transcripts.unplaced(a.session_id):
            self._place_later(a)
        self.service.kick(a.session_id)
        self._maybe_sweep(a)

    def _place_later(self, a: Answered) -> None:
        """Note the thread's latest answer once the transcript knows where the thread stands
        (its writes of a store outage delivered): a session that spoke only while the store
        was down was never read otherwise. One waiter per session, for the latest answer."""
        waiting = self._unplaced.get(a.session_id)
        self._unplaced[a.session_id] = a
        if waiting is None:
            work = self._wait_placed(a.session_id, a.project)
            self.service.tasks.spawn(work, name=f"shadow-placed:{a.session_id}")

    async def _wait_placed(self, session_id: str, project: ProjectRef) -> None:
        deadline = time.monotonic() + PLACED_WAIT_SECONDS
        try:
            while time.monotonic() < deadline:
                await asyncio.sleep(1.0)
                lineage = await self.transcripts.placed(session_id, project)
                latest = self._unplaced.get(session_id)
                if lineage is not None and latest is not None:
                    self._unplaced.pop(session_id, None)
                    await self.noted(latest, Recorded(lineage.generation, None, False))
                    return
        finally:
            self._unplaced.pop(session_id, None)

    def _maybe_sweep(self, a: Answered) -> None:
        """Now and then (``backlog.SWEEP_EVERY``), a project whose session just brought
        credentials has its forgotten backlogs read cold (``ember.shadow.backlog``)."""
        key = str(self.database(a.project).path)
        now = time.monotonic()
        last = self._swept.get(key)
        if last is not None and now - last < backlog.SWEEP_EVERY:
            return
        self._swept[key] = now
        work = self._sweep(a.project, a.adapter.name)
        self.service.tasks.spawn(work, name=f"shadow-backlog:{a.project.identity}")

    async def _sweep(self, project: ProjectRef, protocol: str) -> None:
        db = self.database(project)
        try:
            found = await db.aread(backlog.find)
        except StorageUnavailable:
            self._swept.pop(str(db.path), None)  # the store said so itself: swept when back
            return
        orphans = [b for b in found if not self.service.reads(b.session_id, b.generation)]
        if not orphans:
            return
        budget = await self.runner.budget(db, None)
        if budget.refusal(NOTHING) is not None:
            return  # no room at all: try again at a later sweep, without a row per backlog
        for b in orphans[: backlog.PER_SWEEP]:
            req = RunRequest(b.session_id, b.generation, project, "backlog", protocol)
            await self.service.run_detached(req)

    def _handle(self, a: Answered, st: SessionShadow, recorded: Recorded) -> None:
        service = self.service
        st.generation = recorded.generation
        newest = not a.seq or a.seq >= st.noted_seq
        st.noted_seq = max(st.noted_seq, a.seq)
        if a.kind == "ok" and a.answer is not None and a.sent and newest:
            service.runner.prefixes.note(self._prefix(a, st))
        if recorded.ended is not None:
            service.trigger(a.session_id, "generation-ended", generation=recorded.ended)
        elif recorded.overtaken:
            # The client had this answer and the thread's next request already arrived (and
            # cancelled the session's shadow work): this turn's end must not queue a run
            # now, or it would fork the session in the middle of that next turn. Its own
            # end triggers.
            pass
        elif a.kind == "ok" and turn_ended(a.answer):
            service.trigger(a.session_id, "turn-ended")
        elif a.kind not in ("ok", "cancelled"):
            service.trigger(a.session_id, "turn-failed")

    def _prefix(self, a: Answered, st: SessionShadow) -> Prefix:
        assert a.answer is not None and st.generation is not None
        usage = a.answer.usage
        return Prefix(
            session_id=a.session_id,
            project_key=str(self.database(a.project).path),
            generation=st.generation,
            adapter=a.adapter,
            path=a.path,
            query=a.query,
            headers=a.headers,
            sent=a.sent,
            answer=a.answer,
            recorded_at=time.monotonic(),
            ttl=a.adapter.cache_ttl(a.body),
            input_tokens=usage.total_input_tokens if usage is not None else 0,
            propose_tool=a.propose_tool,
        )

    # -- after a run -------------------------------------------------------------------------

    async def _promote(
        self, project: ProjectRef, session_id: str, facts: Sequence[tuple[str, FactIn]]
    ) -> Mapping[str, str]:
        """Validated facts become project-wide memories, with their evidence; returns the
        memory id of each proposal (the shadow's in mode primary, the steward's in compare)."""
        if self.memories is None or not facts:
            return {}
        store = await asyncio.to_thread(self.memories, project)
        if store is None:
            return {}
        ids = sorted({e.messageId for _, f in facts for e in f.evidence if e.messageId})
        found = await self.database(project).aread(lambda c: by_ids(c, ids))
        digests = {i: m.digest for i, m in found.items()}
        items = memories_for_promotion(facts, session_id, digests)
        # Nobody waits for these: under a flood they get their vectors later (``catch_up``).
        saved = await asyncio.to_thread(lambda: store.add_many(items, background=True))
        return {pid: m.id for (pid, _), m in zip(facts, saved, strict=True)}

    async def _known(self, project: ProjectRef, session_id: str) -> list[Remembered]:
        """What the session's shadow turn is shown as remembered, with ids: the memories
        injected into the session and those its earlier runs stored, as they are now (a
        superseded one by its successor), so a correction can name what it corrects."""
        if self.memories is None:
            return []
        stored = await self.database(project).aread(lambda c: runs.stored_memory_ids(c, session_id))
        opener = self.memories

        def read() -> list[Remembered]:
            store = opener(project)
            if store is None:
                return []
            found = [*store.recalled(session_id), *store.current(stored)]
            return list({m.id: m.content for m in found}.items())

        return await asyncio.to_thread(read)

    async def _steward_after(self, req: RunRequest, record: RunRecord) -> None:
        """Mode compare: the cold steward reads the very window the shadow just read."""
        if self.steward is None:
            return
        runner = self.runner
        prefix = runner.prefixes.get(req.session_id)
        family = BY_NAME.get(req.protocol or "", ANTHROPIC).family
        creds = prefix.credentials() if prefix is not None else None
        creds = creds or runner.prefixes.credentials(str(runner.database(req.project).path), family)
        await self.steward.run(
            req.session_id,
            req.generation,
            req.project,
            req.protocol or "anthropic",
            creds,
            through_seq=record.through_seq,
        )


@replayable  # named by a write journal (``ember.transcript_writes``)
def _first_touch(conn: Connection) -> None:
    """Runs a dead process left open are closed, and the activation watermark is set before
    the first message this process records (history from before shadow memory was enabled
    is never read)."""
    runs.close_interrupted(conn)
    cursors.activate(conn)


@replayable
def _opened(conn: Connection, opened: Opened) -> None:
    """Where shadow memory starts reading a generation, from the first request of it recorded
    with shadow memory on (``cursors``: history from before is never read)."""
    cursors.mark_start(conn, opened.session_id, opened.generation, opened.answer_at)

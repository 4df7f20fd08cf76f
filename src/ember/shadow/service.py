"""The shadow service: when runs happen, and getting out of the user's way.

A session is read once it goes quiet, not after every turn: a hot run costs about what one
more turn of the session costs (both read the whole prefix from the cache), so a run after
every turn would cost about as much as the session itself, and most would be cut short by the
user's next message. Reading once per quiet spell costs one read for any number of turns.

Triggers (a session with a request in flight is never run; its trigger waits for the request
to end):
- ``turn-ended``: the session's own thread got a final answer (the agent waits for its user):
  the run goes once the session has been quiet ``shadow_idle_seconds`` (well inside the
  provider's 5-minute cache), unless the user speaks first;
- ``turn-failed``: that thread's request failed: the same;
- ``idle``: the session has been quiet for ``shadow_idle_seconds`` without a finished turn
  (checked every tick);
- ``generation-ended``: the session's history restarted (a compaction): the old generation's
  unread messages are read after ``DEBOUNCE_SECONDS`` (cold: its prefix is gone);
- stopping (``flush``): a proxy that stops reads what is unread at once, hot, for a few
  seconds at most; what it cannot finish stays unread for a later run (the proxy ``ember
  wrap`` started finishes it first, still serving, for up to ``shadow_finish_seconds``).
A new user message cancels at once: the queued trigger is dropped, a running call is aborted,
the prefix is dropped (the request about to go out makes it stale) and the run is recorded
as cancelled, with no proposal.

Background work runs in the services' task set: never awaited by a drain or a shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ember.errors import StorageUnavailable
from ember.exchange import TaskSet
from ember.project import ProjectRef
from ember.sessions import SessionRegistry
from ember.shadow.models import Trigger
from ember.shadow.policy import DEBOUNCE_SECONDS, Backoff
from ember.shadow.runner import RunRecord, RunRequest, ShadowRunner

log = logging.getLogger(__name__)

#: Shadow runs going at once, across sessions (each is one or a few provider calls).
MAX_CONCURRENT_RUNS = 2
#: A run the store refused (switched off: a PostgreSQL server down, say) is asked for again
#: this much later, until the store takes it.
UNAVAILABLE_RETRY_SECONDS = 5.0

#: What runs after a shadow run of the same backlog (the steward, in mode compare).
AfterRun = Callable[[RunRequest, RunRecord], Awaitable[object]]


@dataclass
class SessionShadow:
    """What the shadow keeps per session (in the session registry, forgotten with it)."""

    project: ProjectRef
    protocol: str
    #: the thread's current transcript generation (None until its first answer is recorded)
    generation: int | None = None
    #: runs waiting, by generation (an ended generation keeps its own until it is read)
    pending: dict[int, Trigger] = field(default_factory=dict)
    due_at: float = 0.0
    task: asyncio.Task[None] | None = None
    request: RunRequest | None = None
    backoff: dict[int, Backoff] = field(default_factory=dict)
    idle_fired: bool = False
    #: the number of the newest request whose prefix was noted: answers are handled after
    #: the client has them, in any order, and an older prefix must not replace a newer one
    noted_seq: int = 0
    #: what the session's latest finished run left (library mode's ``run_now`` returns it)
    last_record: RunRecord | None = None
    #: ``noted_seq`` when the newest run that ran its course started (it read the session,
    #: failed or was skipped; not cancelled. None: none did): a stopping proxy does not ask
    #: again at once what that run just asked
    read_seq: int | None = None
    #: ``noted_seq`` when a stop-time read ran out of time (None: none did): a later stop
    #: does not ask the provider again for what the first could not finish in time
    gave_up_seq: int | None = None


class ShadowService:
    KEY = "shadow"

    def __init__(
        self,
        runner: ShadowRunner,
        sessions: SessionRegistry,
        tasks: TaskSet,
        *,
        idle_seconds: float,
        tick_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        after_run: AfterRun | None = None,
    ) -> None:
        self.runner = runner
        runner.later = tasks.spawn  # a run's facts outlive its cancelling (promote_later)
        self.sessions = sessions
        self.tasks = tasks
        self.idle_seconds = idle_seconds
        self.tick_seconds = tick_seconds
        self.clock = clock
        self.wall = wall
        self.after_run = after_run
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_RUNS)
        self._known: set[str] = set()

    def state(self, session_id: str) -> SessionShadow | None:
        found: SessionShadow | None = self.sessions.feature(session_id, self.KEY, touch=False)
        return found

    def attach(self, session_id: str, project: ProjectRef, protocol: str) -> SessionShadow:
        st = self.state(session_id)
        if st is None:
            st = SessionShadow(project, protocol)
            self.sessions.put_feature(session_id, self.KEY, st)
        st.protocol = protocol
        self._known.add(session_id)
        return st

    # -- triggers --------------------------------------------------------------------------

    def trigger(
        self,
        session_id: str,
        reason: Trigger,
        *,
        delay: float | None = None,
        generation: int | None = None,
    ) -> None:
        """Ask for a run of ``generation`` (default: the current one) after ``delay``
        (default: once the session has been quiet ``idle_seconds``; an ended generation,
        whose prefix is gone anyway, after ``DEBOUNCE_SECONDS``)."""
        st = self.state(session_id)
        if st is None or st.generation is None:
            return
        if delay is None:
            delay = DEBOUNCE_SECONDS if reason == "generation-ended" else self.idle_seconds
        st.pending[st.generation if generation is None else generation] = reason
        st.due_at = self.clock() + delay
        self.tasks.spawn(self._later(session_id, delay), name=f"shadow-wait:{session_id}")

    async def _later(self, session_id: str, delay: float) -> None:
        await asyncio.sleep(delay)
        self.kick(session_id)

    def kick(self, session_id: str, *, now: bool = False) -> None:
        """Start the pending run if it is due (``now``: whenever it was due) and the session
        is quiet."""
        st = self.state(session_id)
        if st is None or not st.pending or st.generation is None:
            return
        # (a timer may fire a hair early on the loop's clock: 50 ms of slack)
        early = not now and self.clock() + 0.05 < st.due_at
        if early or self.sessions.busy(session_id):
            return  # not yet; the end of the request in flight (or the tick) kicks again
        if st.task is not None and not st.task.done():
            return
        generation = min(st.pending)  # the oldest generation first: it can only go cold
        reason = st.pending.pop(generation)
        backoff = st.backoff.get(generation, Backoff())
        if backoff.active(self.wall()):
            self.kick(session_id)  # another generation may be waiting
            return
        req = RunRequest(session_id, generation, st.project, reason, st.protocol)
        st.request = req
        st.task = self.tasks.spawn(self._run(st, req), name=f"shadow:{session_id}")

    async def _run(self, st: SessionShadow, req: RunRequest) -> None:
        st.last_record = None
        async with self._slots:
            if req.abort.is_set():
                return
            seen = st.noted_seq
            try:
                record = await self.runner.run(req)
            except asyncio.CancelledError:
                raise
            except StorageUnavailable:  # the database said so itself, once
                # nothing was read: asked again later, not dropped (a session that went quiet
                # during a store outage was never read: nothing would trigger it again)
                if not req.abort.is_set():
                    self.trigger(
                        req.session_id, req.trigger, delay=UNAVAILABLE_RETRY_SECONDS,
                        generation=req.generation,
                    )  # fmt: skip
                return
            except Exception:
                log.exception("shadow run of session %s failed", req.session_id)
                return
        st.last_record = record
        if (record is None or record.status != "cancelled") and not req.abort.is_set():
            st.read_seq = seen
        if record is None:
            return
        previous = st.backoff.get(req.generation, Backoff())
        failed = record.status == "failed"
        st.backoff[req.generation] = previous.failed(self.wall()) if failed else Backoff()
        if self.after_run is not None and not req.abort.is_set():
            try:
                await self.after_run(req, record)
            except StorageUnavailable:  # the database said so itself, once
                pass
            except Exception:
                log.exception("the steward's run of session %s failed", req.session_id)
        if st.pending:
            self.tasks.spawn(self._later(req.session_id, 0.0), name="shadow-next")

    def cancel(self, session_id: str) -> None:
        """A user message arrived: drop the trigger, abort the run, drop the prefix."""
        st = self.state(session_id)
        self.runner.prefixes.drop(session_id)
        if st is None:
            return
        current = st.generation
        st.pending = {g: r for g, r in st.pending.items() if g != current}
        st.idle_fired = False
        if st.request is not None:
            st.request.abort.set()
        if st.task is not None and not st.task.done():
            st.task.cancel()

    def reads(self, session_id: str, generation: int) -> bool:
        """Whether a live session of this process will read ``generation`` itself."""
        st = self.state(session_id)
        return st is not None and st.generation == generation

    async def run_detached(self, req: RunRequest) -> None:
        """One run of a session no live session holds (a forgotten backlog), in a slot like
        any other; never raises."""
        async with self._slots:
            try:
                await self.runner.run(req)
            except asyncio.CancelledError:
                raise
            except StorageUnavailable:  # the database said so itself, once
                pass
            except Exception:
                log.exception("shadow run of the backlog of session %s failed", req.session_id)

    # -- stopping ----------------------------------------------------------------------------

    async def flush(
        self,
        seconds: float,
        skipped: Callable[[], bool] = lambda: False,
        reading: Callable[[int], None] | None = None,
    ) -> int:
        """Read every session with messages waiting, now, for at most ``seconds`` (or until
        ``skipped`` says the user asked to skip it); a run still going then is cancelled (what
        its call cost is recorded) and its messages stay unread. Returns how many sessions it
        started reading. ``reading``: the proxy keeps serving meanwhile (it finishes in the
        background for ``ember wrap``), and is told that number at once, for the terminal."""
        due = [sid for sid in list(self._known) if self._waiting(sid)]
        if not due or seconds <= 0:
            return 0
        if reading is None:
            log.warning(
                "reading what %d session(s) said while the provider's cache is hot (up to %g "
                "s; press Ctrl-C again to skip)",
                len(due),
                seconds,
            )
        else:
            log.info(
                "shadow: finishing what %d session(s) said, in the background (up to %g s)",
                len(due),
                seconds,
            )
        for sid in due:
            st = self.state(sid)
            if st is not None and st.generation is not None:  # what starts it now is the stop
                st.pending[st.generation] = "stopping"
            self.kick(sid, now=True)
        if reading is not None:
            reading(len(due))
        deadline = self.clock() + seconds
        while self.clock() < deadline and not skipped() and self._running(due):
            await asyncio.sleep(0.05)
        for sid in due:
            st = self.state(sid)
            if st is not None and st.task is not None and not st.task.done():
                st.task.cancel()
                st.gave_up_seq = st.noted_seq
        return len(due)

    def _waiting(self, session_id: str) -> bool:
        """A trigger waits, or the session's prefix is still hot and no run ran its course
        since (its last messages may be unread: the run finds out, and does nothing when they
        are not); not when a stop-time read of the same messages ran out of time."""
        st = self.state(session_id)
        if st is None or st.generation is None or st.gave_up_seq == st.noted_seq:
            return False
        if st.pending:
            return True
        unread = st.read_seq is None or st.noted_seq > st.read_seq
        return unread and self.runner.prefixes.get(session_id) is not None

    def _running(self, sessions: list[str]) -> bool:
        for sid in sessions:
            st = self.state(sid)
            if st is not None and (st.pending or (st.task is not None and not st.task.done())):
                return True
        return False

    # -- the tick --------------------------------------------------------------------------

    async def tick_forever(self) -> None:
        while True:
            await asyncio.sleep(self.tick_seconds)
            self.tick()

    def tick(self) -> None:
        """Drop stale prefixes (and the credentials with them), fire idle triggers, start
        runs whose wait is over."""
        self.runner.prefixes.expire()
        for session_id in list(self._known):
            st = self.state(session_id)
            if st is None:
                self._known.discard(session_id)
                continue
            idle = self.sessions.idle_for(session_id)
            if idle is not None and idle >= self.idle_seconds and not st.idle_fired:
                st.idle_fired = True
                if not st.pending:
                    self.trigger(session_id, "idle", delay=0.0)
            self.kick(session_id)

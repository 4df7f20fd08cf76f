"""The transcript of each session's own thread, recorded once for every feature that reads it.

Shadow memory reads it (what to extract, and the messages a fact's evidence names); traffic
learning points its evidence at its rows. Recording belongs to the kernel, not to either: with
shadow memory off, traffic learning still has rows to point at (it used to learn nothing then),
and a thread is never recorded twice because two features wanted it.

Per exchange, the first feature that asks records and the others get the same ``Recorded``
(``of_exchange``), whatever their order in the pipeline.

Answers are handled after the client has them, in any order: each request of a thread is
numbered when it arrives (``begin``), and an answer older than one already recorded is skipped
(its history is held by the newer one; recording it would look like a restarted history).
Answers of one thread are recorded one at a time: two at once would both see no lineage yet and
record the thread twice, the second copy as a new generation.

A store whose held writes outlive the process (PostgreSQL's journal: ``Database.durable_hold``)
is not waited for while it is down: each request's write is an op held and journaled
(``ember.transcript_writes``), and a thread this process could not read the lineage of is
placed inside its write, when the server has it (the thread is "unplaced" until its writes
are in). Elsewhere, as before, the write is awaited and a file that is off fails it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ember.errors import StorageUnavailable
from ember.protocols.base import AssembledMessage, ProtocolAdapter, TranscriptItem
from ember.protocols.prewarm import is_prewarm
from ember.protocols.transcript_items import answer_items, transcript_items
from ember.store.driver import Connection
from ember.store.ops import Op
from ember.store.transcript_rows import (
    Lineage,
    Row,
    latest_generation,
    load_lineage,
    place,
    position_digests,
    rows_for,
)
from ember.transcript_writes import (
    Opened,
    first_touch,
    hook_names,
    masked,
    pieces,
    save,
    saved_turn,
    unplaced,
)

if TYPE_CHECKING:
    from ember.exchange import Exchange, Outcome
    from ember.project import ProjectRef
    from ember.sessions import SessionRegistry
    from ember.store.database import Database
    from ember.store.registry import Storage

# ``Opened`` is defined with the write that carries it; features import it from here.
__all__ = ["FirstTouch", "Opened", "OpenedHook", "Recorded", "Transcripts", "Turn"]

#: A write job run once per project database and process, before its first recorded message
#: (shadow memory sets its activation watermark there: history from before it was enabled is
#: never read).
FirstTouch = Callable[[Connection], None]


#: Part of the write job that records the first request of each generation a process records
#: (after its rows): shadow memory marks there where it starts reading the generation, from
#: what the request itself holds — never from what some earlier recording left behind.
OpenedHook = Callable[[Connection, Opened], None]

#: ``Exchange.state`` slots: the request's number, and its recording (a task, shared).
_SEQ = "transcript.seq"
_RECORDED = "transcript.recorded"


@dataclass(frozen=True)
class Turn:
    """One answered request of a thread: the conversation as the provider saw it, whole,
    and the answer (None when there was none)."""

    session_id: str
    project: ProjectRef
    adapter: ProtocolAdapter
    body: Any
    answer: AssembledMessage | None
    #: the number ``begin`` gave the request (0: not numbered, always recorded)
    seq: int = 0


@dataclass(frozen=True)
class Recorded:
    """Where the thread's transcript stands after a request was recorded."""

    generation: int
    #: the generation this request ended by starting a new one (a restarted history)
    ended: int | None
    #: a newer request of the thread had already arrived when this answer was recorded
    overtaken: bool


@dataclass
class _Thread:
    lineage: Lineage | None = None
    issued: int = 0
    recorded_seq: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: the generation the ``OpenedHook``s last ran for (0: none yet)
    opened: int = 0
    #: writes of this thread placed in their own transaction, not committed yet: until
    #: they are, the stored lineage is not the thread's (module doc)
    unplaced: int = 0
    #: the journaled write ``record`` queued, waited for once the lock is let go (a wait
    #: under the lock held every later answer of the thread back, unjournaled, for as long
    #: as the store took to fail: a kill then lost them)
    committing: Any = None


class Transcripts:
    """Records the threads of every project this process serves (one per process)."""

    KEY = "transcript"

    def __init__(self, storage: Storage, home: Path, sessions: SessionRegistry) -> None:
        self.storage = storage
        self.home = home
        self.sessions = sessions
        self._first_touch: list[FirstTouch] = []
        self._opened: list[OpenedHook] = []
        self._touched: set[Path] = set()

    def before_first_record(self, hook: FirstTouch) -> None:
        """Run ``hook`` (a write job) in each project database before this process records
        its first message there."""
        self._first_touch.append(hook)

    def on_opened(self, hook: OpenedHook) -> None:
        """Run ``hook`` in the write job recording the first request of each generation of a
        session this process records (once more after the thread was forgotten: the hook must
        keep what the first run wrote)."""
        self._opened.append(hook)

    def database(self, project: ProjectRef) -> Database:
        return self.storage.database(project.db_path(self.home))

    def _thread(self, session_id: str) -> _Thread:
        found: _Thread | None = self.sessions.feature(session_id, self.KEY, touch=False)
        if found is None:
            found = _Thread()
            self.sessions.put_feature(session_id, self.KEY, found)
        return found

    def begin(self, session_id: str) -> int:
        """A new request of the thread arrived; returns its number."""
        thread = self._thread(session_id)
        thread.issued += 1
        return thread.issued

    async def record(self, turn: Turn) -> Recorded | None:
        """Write the request's new messages and the answer; None when a newer request of the
        thread was recorded first (nothing is written)."""
        thread = self._thread(turn.session_id)
        async with thread.lock:
            if turn.seq and turn.seq <= thread.recorded_seq:
                return None
            thread.recorded_seq = max(thread.recorded_seq, turn.seq)
            overtaken = bool(turn.seq) and turn.seq < thread.issued
            thread.committing = None
            written = await self._write(turn, thread)
            committing = thread.committing
        if committing is not None:  # out of the lock: the thread's next write is queued now
            await _committed_while_up(self.database(turn.project), committing)
        if written is None:
            return None  # written where it will be placed: where it stands is not known
        before, after = written
        ended = before.generation if before is not None else None
        if ended == after.generation:
            ended = None
        return Recorded(after.generation, ended, overtaken)

    def unplaced(self, session_id: str) -> bool:
        """The thread's recent writes went to be placed by themselves (module doc): where it
        stands is not known here yet (``placed`` tells, once it is)."""
        found: _Thread | None = self.sessions.feature(session_id, self.KEY, touch=False)
        return found is not None and found.lineage is None and found.unplaced > 0

    async def placed(self, session_id: str, project: ProjectRef) -> Lineage | None:
        """Where an unplaced thread stands now that its writes are in (read from the store,
        and kept); None while they are not, or the store cannot be read."""
        thread = self._thread(session_id)
        async with thread.lock:
            if thread.lineage is not None:
                return thread.lineage
            if thread.unplaced:
                return None
            db = self.database(project)
            try:
                thread.lineage, _ = await db.aread(lambda c: _known(c, session_id))
            except StorageUnavailable:
                return None
            if thread.lineage is not None:
                thread.opened = thread.lineage.generation  # its own write ran the hooks
            return thread.lineage

    # -- per exchange ------------------------------------------------------------------------

    def begin_exchange(self, ex: Exchange) -> int:
        """``begin`` once per exchange, whichever feature calls first; 0 for an exchange that
        is not recorded (not the user's own thread, or no project)."""
        if _SEQ not in ex.state:
            recorded = ex.is_main_thread and ex.project is not None
            ex.state[_SEQ] = self.begin(ex.session_id) if recorded else 0
        seq: int = ex.state[_SEQ]
        return seq

    @staticmethod
    def records(ex: Exchange) -> bool:
        """Whether the exchange is a turn of the user's conversation: its own thread (not a
        title request or a sub-agent), a resolved project, and not a cache prewarm (Codex's
        socket opener sends an empty turn to warm the cache: recording it would read as the
        user saying nothing)."""
        return (
            ex.is_main_thread
            and ex.project is not None
            and not is_prewarm(ex.adapter.name, ex.body)
        )

    async def of_exchange(self, ex: Exchange, outcome: Outcome) -> Recorded | None:
        """The exchange recorded once, whichever feature asks first (later ones get the same
        answer); None for an exchange that is not recorded (not the user's own thread, no
        project, a cache prewarm, or overtaken by a newer request's answer)."""
        task: asyncio.Future[Recorded | None] | None = ex.state.get(_RECORDED)
        if task is None:
            if not self.records(ex) or ex.project is None:  # (the second for the type checker)
                return None
            turn = Turn(
                ex.session_id,
                ex.project,
                ex.adapter,
                outcome.conversation(ex),
                outcome.message,
                ex.state.get(_SEQ, 0),
            )
            task = ex.state[_RECORDED] = asyncio.ensure_future(self.record(turn))
        return await asyncio.shield(task)

    # -- the write ---------------------------------------------------------------------------

    async def _write(self, turn: Turn, thread: _Thread) -> tuple[Lineage | None, Lineage] | None:
        """Returns where the thread stood before (as stored, for a thread this process has
        not recorded yet) and after; None when the request went to be placed in its own
        write (a held store that could not be read: module doc)."""
        db = self.database(turn.project)
        durable = db.durable_hold
        await self._touch(db, durable)
        latest = 0
        placed = thread.lineage is not None or not thread.unplaced
        if thread.lineage is None and placed:
            try:
                thread.lineage, latest = await db.aread(lambda c: _known(c, turn.session_id))
            except StorageUnavailable:
                if not durable:
                    raise
                placed = False
        if not placed:
            await self._write_unplaced(db, turn, thread)
            return None
        before = thread.lineage
        rows, lineage = _rows(turn, before, latest)
        thread.lineage = lineage
        opening = self._opened if thread.opened != lineage.generation else []
        thread.opened = lineage.generation
        if rows or lineage != before or opening:  # a resent request that adds nothing: nothing
            answer_at = turn.adapter.message_count(turn.body) + _continuation_offset(
                turn.body, before
            )
            await self._write_placed(db, turn.session_id, rows, lineage, opening, answer_at)
        return before, lineage

    async def _touch(self, db: Database, durable: bool) -> None:
        """The ``before_first_record`` hooks, once per database and process, before its
        first message (queued first: the writer keeps the order)."""
        if db.path in self._touched:
            return
        self._touched.add(db.path)
        hooks = list(self._first_touch)
        if not hooks:
            return
        names = hook_names(hooks) if durable else None
        if names is not None:
            db.submit(Op(first_touch, names), label="transcript:first")
            return
        await db.awrite(lambda c: [h(c) for h in hooks], label="transcript:first")

    async def _write_placed(
        self,
        db: Database,
        session_id: str,
        rows: list[Row],
        lineage: Lineage,
        opening: list[OpenedHook],
        answer_at: int,
    ) -> None:
        names = hook_names(opening) if db.durable_hold else None
        if names is None:
            opened = Opened(session_id, lineage.generation, answer_at)

            def job(c: Connection) -> None:
                save(c, session_id, rows, lineage)
                for hook in opening:
                    hook(c, opened)

            await db.awrite(job, label="transcript")
            return
        shown = await _prepared(lambda: masked(rows))
        op = saved_turn(session_id, shown, lineage, names, answer_at)
        self._thread(session_id).committing = db.submit(op, label="transcript")

    async def _write_unplaced(self, db: Database, turn: Turn, thread: _Thread) -> None:
        """Every item of the request, placed by its own write (``record_unplaced``); the
        thread stays unplaced here until its writes are in."""
        names = hook_names(self._opened)
        if names is None:
            raise StorageUnavailable(db.health.describe())  # cannot be held: as before
        adapter, body = turn.adapter, turn.body
        count = adapter.message_count(body)
        answer = answer_items(adapter, turn.answer, count) if turn.answer else []
        items, said = await _prepared(
            lambda: (pieces(transcript_items(adapter, body)), pieces(answer))
        )
        continues = isinstance(body, dict) and bool(body.get("previous_response_id"))
        op = unplaced(turn.session_id, items, said, count, continues, names)
        thread.unplaced += 1
        done = db.submit(op, label="transcript")
        loop = asyncio.get_running_loop()

        def one_less() -> None:
            thread.unplaced -= 1

        def placed(_: Any) -> None:  # on the writer's thread: counted on the loop's
            with contextlib.suppress(RuntimeError):  # the loop is gone: so is the thread
                loop.call_soon_threadsafe(one_less)

        done.add_done_callback(placed)


T = TypeVar("T")

#: Masking and cutting a turn's text before its write is journaled runs on threads of its
#: own. The loop's default ones can all be waiting on a store that has just gone away (each
#: read waits for a connection until the outage is known, seconds), and a turn queued behind
#: them was not in the journal yet when a kill came: answered, its messages lost.
_PREPARE = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ember-transcript")


async def _prepared(fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(_PREPARE, fn)


async def _committed_while_up(db: Database, done: Any) -> None:
    """Wait for the write while its database is up (a reader after this one sees it); not
    while it is off: the write is held, and the thread's next request goes on meanwhile."""
    wrapped = asyncio.wrap_future(done)
    while not wrapped.done():
        if not db.health.ok:
            return
        await asyncio.wait({wrapped}, timeout=0.25)
    wrapped.result()


def _rows(turn: Turn, before: Lineage | None, latest: int) -> tuple[list[Row], Lineage]:
    """The rows to insert for ``turn`` and where the thread stands after them (pure)."""
    adapter, body = turn.adapter, turn.body
    offset = _continuation_offset(body, before)
    # Read from the last message the thread's previous request held: what comes before it
    # is recorded already, unless this request does not extend that one (then re-read).
    hint = max(0, before.request_count - 1) if before and not offset else 0
    items = transcript_items(adapter, body, from_position=hint)
    digests = position_digests(items)
    if offset and before is not None:  # only the new items came: after what is recorded
        items = [dataclasses.replace(i, position=i.position + offset) for i in items]
        generation, start = before.generation, offset
    else:
        generation, start = place(before, digests, latest)
        if start < hint:  # a new generation: every message of it is recorded
            items = transcript_items(adapter, body)
            digests = position_digests(items)
    sent = start
    if not offset and before is not None and generation == before.generation:
        items, sent = _after_resent_answer(items, before.request_count, start)
    count = adapter.message_count(body) + offset
    answer = answer_items(adapter, turn.answer, count) if turn.answer else []
    rows = [
        *rows_for(turn.session_id, generation, items, sent),
        *rows_for(turn.session_id, generation, answer, start),
    ]
    recorded = max([count, *(x.position + 1 for x in answer)])
    if offset and before is not None:
        return rows, dataclasses.replace(before, recorded=recorded)
    first, last = (digests[0], digests[-1]) if digests else ("", "")
    return rows, Lineage(generation, first, len(digests), last, recorded)


def _after_resent_answer(
    items: list[TranscriptItem], sent: int, recorded: int
) -> tuple[list[TranscriptItem], int]:
    """The items of a request that extends the thread's previous one, from the first position
    after that request's last message (``sent``), without the previous answer coming back.

    The previous answer was recorded after every message of its request, system messages
    included (``recorded``); a client that drops a system message trailing its ask and sends it
    again after the next ask (aider 0.86's edit-format rules) puts the answer and the next ask
    before that position, so reading from ``recorded`` lost the user's next ask. Between
    ``sent`` and ``recorded`` only the answer (the assistant's items, recorded already) can
    come back; anything else there is new."""
    kept = [i for i in items if not (sent <= i.position < recorded and i.role == "assistant")]
    return kept, min(sent, recorded)


def _known(conn: Connection, session_id: str) -> tuple[Lineage | None, int]:
    """(the session's stored lineage, its highest recorded generation)."""
    return load_lineage(conn, session_id), latest_generation(conn, session_id)


def _continuation_offset(body: Any, lineage: Lineage | None) -> int:
    """A Responses request that continues a stored response (``previous_response_id``, as
    Codex does over WebSocket) sends only its new items: they follow what is recorded."""
    cont = isinstance(body, dict) and bool(body.get("previous_response_id"))
    return lineage.recorded if cont and lineage is not None else 0

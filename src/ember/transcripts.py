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
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.protocols.base import AssembledMessage, ProtocolAdapter
from ember.protocols.prewarm import is_prewarm
from ember.protocols.transcript import answer_items, transcript_items
from ember.store.driver import Connection
from ember.store.transcript import (
    Lineage,
    Row,
    insert_rows,
    latest_generation,
    load_lineage,
    place,
    position_digests,
    rows_for,
    save_lineage,
)

if TYPE_CHECKING:
    from ember.exchange import Exchange, Outcome
    from ember.project import ProjectRef
    from ember.sessions import SessionRegistry
    from ember.store.database import Database
    from ember.store.registry import Storage

#: A write job run once per project database and process, before its first recorded message
#: (shadow memory sets its activation watermark there: history from before it was enabled is
#: never read).
FirstTouch = Callable[[Connection], None]


@dataclass(frozen=True)
class Opened:
    """A generation of a session as this process first records a request of it: the request's
    own messages end before ``answer_at`` (where its answer is recorded)."""

    session_id: str
    generation: int
    answer_at: int


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
            before, after = await self._write(turn, thread)
            ended = before.generation if before is not None else None
            if ended == after.generation:
                ended = None
            return Recorded(after.generation, ended, overtaken)

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

    async def _write(self, turn: Turn, thread: _Thread) -> tuple[Lineage | None, Lineage]:
        """Returns where the thread stood before (as stored, for a thread this process has
        not recorded yet) and after."""
        db = self.database(turn.project)
        if db.path not in self._touched:
            self._touched.add(db.path)
            if self._first_touch:
                hooks = list(self._first_touch)
                await db.awrite(lambda c: [h(c) for h in hooks], label="transcript:first")
        latest = 0
        if thread.lineage is None:
            thread.lineage, latest = await db.aread(lambda c: _known(c, turn.session_id))
        before = thread.lineage
        rows, lineage = _rows(turn, before, latest)
        thread.lineage = lineage
        opening = self._opened if thread.opened != lineage.generation else []
        thread.opened = lineage.generation
        if rows or lineage != before or opening:  # a resent request that adds nothing: nothing
            answer_at = turn.adapter.message_count(turn.body) + _continuation_offset(
                turn.body, before
            )
            opened = Opened(turn.session_id, lineage.generation, answer_at)

            def job(c: Connection) -> None:
                _save(c, turn.session_id, rows, lineage)
                for hook in opening:
                    hook(c, opened)

            await db.awrite(job, label="transcript")
        return before, lineage


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
    count = adapter.message_count(body) + offset
    answer = answer_items(adapter, turn.answer, count) if turn.answer else []
    rows = rows_for(turn.session_id, generation, [*items, *answer], start)
    recorded = max([count, *(x.position + 1 for x in answer)])
    if offset and before is not None:
        return rows, dataclasses.replace(before, recorded=recorded)
    first, last = (digests[0], digests[-1]) if digests else ("", "")
    return rows, Lineage(generation, first, len(digests), last, recorded)


def _known(conn: Connection, session_id: str) -> tuple[Lineage | None, int]:
    """(the session's stored lineage, its highest recorded generation)."""
    return load_lineage(conn, session_id), latest_generation(conn, session_id)


def _save(conn: Connection, session_id: str, rows: list[Row], lineage: Lineage) -> None:
    if rows:
        insert_rows(conn, rows)
    save_lineage(conn, session_id, lineage)


def _continuation_offset(body: Any, lineage: Lineage | None) -> int:
    """A Responses request that continues a stored response (``previous_response_id``, as
    Codex does over WebSocket) sends only its new items: they follow what is recorded."""
    cont = isinstance(body, dict) and bool(body.get("previous_response_id"))
    return lineage.recorded if cont and lineage is not None else 0

"""The proxy side of traffic learning: watch each answered request of the user's thread.

Each answered request is in the transcript first (the kernel's ``Services.transcripts``,
shared with shadow memory and recorded once per exchange, whether shadow memory is on or
off): each tool result and user message is then a transcript row whose id the evidence
names. Evidence is checked against those rows before anything is saved (a pointer to a row
that is not there, of another session, or of the wrong kind is dropped; a fact left without
evidence is not saved): fail closed for data, fail open for the request — nothing here can
change or fail the user's request.

Sightings are counted in the project's own database (``sightings``), not in this process: a
lesson seen once in each of two sessions is saved even when each ran through its own proxy,
and one seen in a message counted before (a resumed session's history, sent again through a
new proxy) is not counted again. Such a message is named as every replay names it
(``replay_name``), not by its transcript id: Claude Code's ``--continue`` and ``--resume``
resume under a new session id, which changes every transcript id of the history.
The request path only queues the write job (no read, no wait); what reached its threshold is
saved by a background task, and a save mark stands only for a memory that was written (a save
that failed releases its lessons, so their next sighting saves them).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ember.bounded import Bounded
from ember.config import Settings
from ember.errors import StorageError, StorageUnavailable
from ember.exchange import Exchange, Outcome, Services, Stage
from ember.facts import Evidence, FactStore, MemoryOpener, NewMemory
from ember.project import ProjectRef
from ember.protocols.base import TranscriptItem
from ember.protocols.calls import tool_calls
from ember.protocols.transcript_items import item_digest, own_words, transcript_items
from ember.redaction import redact
from ember.store.database import Database
from ember.store.registry import Storage
from ember.store.transcript_rows import by_ids, message_id
from ember.traffic.learner import recoveries_to_drop
from ember.traffic.patterns import (
    RECOVERY_WINDOW,
    Category,
    Observation,
    ToolRun,
    observe,
    states_a_preference,
)
from ember.traffic.sightings import Sightings
from ember.transcript_recorder import Transcripts

log = logging.getLogger(__name__)

MAX_SESSIONS = 512
MAX_SEEN = 4_096
#: How long closing waits for lessons being saved (past it, a save mark may lack its memory).
CLOSE_WAIT_SECONDS = 10.0
#: What each kind of evidence must point at (shadow memory's rule).
_TARGET = {"tool-verified": "tool_result", "user-stated": "user", "user-accepted": "user"}


@dataclass
class _Book:
    """What this process has seen of one session: results already observed, recent calls."""

    seen: Bounded[str, None] = field(default_factory=lambda: Bounded(MAX_SEEN))
    recent: deque[ToolRun] = field(default_factory=lambda: deque(maxlen=RECOVERY_WINDOW))

    def first_sight(self, key: str) -> bool:
        return self.seen.first_sight(key, None)


class TrafficStage(Stage):
    name = "traffic"

    def __init__(
        self, settings: Settings, memories: MemoryOpener, sightings: Sightings | None = None
    ) -> None:
        self.settings = settings
        self.memories = memories
        self.sightings = sightings if sightings is not None else Sightings()
        self.storage: Storage | None = None
        self.transcripts: Transcripts | None = None
        self._books: Bounded[tuple[str, str], _Book] = Bounded(MAX_SESSIONS)
        self._saving: set[asyncio.Task[None]] = set()

    async def start(self, services: Services) -> None:
        self.storage = services.storage
        self.transcripts = services.transcripts

    async def on_request(self, ex: Exchange) -> None:
        if self.transcripts is not None:
            self.transcripts.begin_exchange(ex)

    async def settle(self) -> None:
        while self._saving:
            await asyncio.gather(*list(self._saving), return_exceptions=True)

    async def close(self) -> None:
        """Let lessons being saved finish (or be released) before the databases close,
        bounded: a save mark committed without its memory keeps the lesson from being saved
        until it ages out (``learner.max_age``)."""
        if self._saving:
            await asyncio.wait(set(self._saving), timeout=CLOSE_WAIT_SECONDS)

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        if outcome.kind != "ok" or not ex.is_main_thread or ex.project is None:
            return
        if not _worth_a_look(ex):
            return
        try:
            # A WebSocket continuation carries only its new items; the transcript (and the
            # ids evidence names) count positions in the whole conversation.
            await self._learn(ex, outcome, ex.project)
        except StorageUnavailable:  # the database said so itself, once
            pass
        except Exception:  # fail open: learning never touches the user's request
            log.warning("traffic learning skipped a request", exc_info=True)

    def _book(self, project: str, session: str) -> _Book:
        key = (project, session)
        book = self._books.get(key) or _Book()
        self._books.put(key, book)
        return book

    async def _learn(self, ex: Exchange, outcome: Outcome, project: ProjectRef) -> None:
        if self.storage is None or self.transcripts is None:
            return
        recorded = await self.transcripts.of_exchange(ex, outcome)
        if recorded is None:
            return  # not recorded (an older answer, a prewarm): no rows to point at
        db = self.storage.database(project.db_path(self.settings.home))
        session = ex.session_id
        generation = recorded.generation
        body = outcome.conversation(ex)
        items = transcript_items(ex.adapter, body)
        ids = {
            id(i): message_id(session, generation, i.position, i.part, item_digest(i))
            for i in items
        }
        book = self._book(str(db.path), session)
        new = _new_runs(items, tool_calls(ex.adapter, body), ids, book)
        user = next((i for i in reversed(items) if i.kind == "user"), None)
        user_id = ids[id(user)] if user is not None and book.first_sight(ids[id(user)]) else None
        said = replay_name(items, user) if user_id and user else None
        found = observe(
            list(book.recent), new, session, user.text if user_id and user else "", user_id, said
        )
        book.recent.extend(new)
        if not found:
            return
        now = time.time()
        job = db.submit(lambda c: self.sightings.record(c, found, now), label="traffic")
        task = asyncio.create_task(self._counted(job, db, project, session))
        self._saving.add(task)
        task.add_done_callback(self._saving.discard)

    async def _counted(
        self, job: Future[list[Observation]], db: Database, project: ProjectRef, session: str
    ) -> None:
        """Once the sightings are committed: save what reached its threshold."""
        try:
            ready = await asyncio.wrap_future(job)
        except StorageError:
            return  # the database reports its own failure, once (``store.health``)
        except Exception:
            log.warning("traffic learning could not count a sighting", exc_info=True)
            return
        if ready:
            await self._save(db, project, session, ready)

    async def _save(
        self, db: Database, project: ProjectRef, session: str, facts: list[Observation]
    ) -> None:
        unsaved = [f.key for f in facts]
        try:
            checked = await db.aread(lambda c: _checked(c, facts))
            secret = {f.key for f in facts if redact(f.content).only_secret}
            refused = [k for k in unsaved if k not in checked or k in secret]
            if refused:
                await db.awrite(lambda c: self.sightings.forget(c, refused), label="traffic")
            unsaved = [k for k in unsaved if k in checked and k not in secret]
            if not unsaved:
                return
            store = await asyncio.to_thread(self.memories, project)
            if store is None:
                await self._release(db, unsaved)
                return
            items = [_memory(f, checked[f.key], session) for f in facts if f.key in unsaved]
            await asyncio.to_thread(lambda: store.add_many(items, background=True))
            unsaved = []
            await asyncio.to_thread(_prune_recoveries, store)
        except StorageUnavailable:  # the database said so itself, once; the lesson waits
            return
        except Exception:
            log.warning("traffic learning could not save %d fact(s)", len(facts), exc_info=True)
            if unsaved:
                await self._release(db, unsaved)

    async def _release(self, db: Database, keys: Sequence[str]) -> None:
        try:
            await db.awrite(lambda c: self.sightings.release(c, keys), label="traffic")
        except StorageUnavailable:  # the database said so itself, once
            pass
        except Exception:
            log.warning("traffic learning could not release %d fact(s)", len(keys), exc_info=True)


def _worth_a_look(ex: Exchange) -> bool:
    """Whether the request's latest turn holds tool results or words that read like a
    standing instruction: checked on the latest turn only, so the many requests that have
    neither cost no walk of the whole history (it was a twentieth of the proxy's busy time).

    The user's own words, as ``_learn`` reads them (``own_words``): Claude Code puts its
    reminders ("... do not ...", CLAUDE.md's rules) inside the user's message, so the raw
    text read as an instruction on nearly every ask, and every ask paid for the walk."""
    body, adapter = ex.body, ex.adapter
    if adapter.tool_results(body):
        return True
    items = body.get("input") if isinstance(body, dict) else None
    last = items[-1] if isinstance(items, list) and items else None
    if isinstance(last, dict) and str(last.get("type", "")).endswith("_call_output"):
        return True  # Responses: custom and shell tool outputs too
    index = adapter.latest_user_index(body)
    return index is not None and states_a_preference(own_words(adapter.user_text(body, index)))


def _new_runs(
    items: list[TranscriptItem], calls: dict[str, Any], ids: dict[int, str], book: _Book
) -> list[ToolRun]:
    """The tool results of this request not seen before in this session, with their calls."""
    runs = []
    for item in items:
        if item.kind not in ("tool_result", "tool_error") or not item.call_ids:
            continue
        if not book.first_sight("call:" + item.call_ids[0]):
            continue
        call = calls.get(item.call_ids[0])
        tool = item.tool_name or (call.name if call is not None else "")
        args = call.arguments if call is not None else {}
        error = item.kind == "tool_error"
        named = replay_name(items, item)
        runs.append(ToolRun(tool, args, item.text, error, ids[id(item)], named))
    return runs


def replay_name(items: Sequence[TranscriptItem], item: TranscriptItem) -> str:
    """``item`` as any replay of its conversation names it, whatever the session id and
    generation it is recorded under: a tool result by its call's id (the provider minted it,
    the client sends it back verbatim), anything else by the conversation's first message,
    its place and its words (``message_id`` with that first message for the session)."""
    if item.call_ids:
        return "call:" + item.call_ids[0]
    root = item_digest(items[0]) if items else ""
    return "said:" + message_id(root, 0, item.position, item.part, item_digest(item))


def _checked(conn: Any, facts: list[Observation]) -> dict[str, tuple[Evidence, ...]]:
    """Per fact key, the evidence that holds against this project's transcript (a message
    pointer must name a row of the right kind: a successful tool result for
    ``tool-verified``, the user's words for ``user-stated``); facts that pointed at messages
    and have none left are left out. Sightings from several sessions of the project all
    count: the file is the project's, so no pointer can leave it."""
    wanted = [p.message_id for f in facts for p in f.evidence if p.message_id]
    rows = by_ids(conn, wanted)
    out: dict[str, tuple[Evidence, ...]] = {}
    for fact in facts:
        kept: list[Evidence] = []
        for p in fact.evidence:
            if p.session_id is not None:
                kept.append(p)
            elif p.message_id is not None:
                row = rows.get(p.message_id)
                if row is not None and row.kind == _TARGET.get(p.kind):
                    kept.append(p)
        needs_message = any(p.message_id for p in fact.evidence)
        if kept and (not needs_message or any(e.message_id for e in kept)):
            out[fact.key] = tuple(kept)
    return out


def _memory(fact: Observation, evidence: tuple[Evidence, ...], session: str) -> NewMemory:
    return NewMemory(
        fact.content,
        importance=0.5,
        category=fact.category.value,
        metadata={"source": "traffic", "key": fact.key, "session": session},
        evidence=evidence,
    )


def _prune_recoveries(store: FactStore) -> None:
    """At most 15 recovery facts, none older than 21 days (``learner.recoveries_to_drop``)."""
    mine = [
        (m.id, m.created_at)
        for m in store.list()
        if m.category == Category.ERROR_RECOVERY.value and m.metadata.get("source") == "traffic"
    ]
    for memory_id in recoveries_to_drop(mine, time.time()):
        store.delete(memory_id)

"""The injection ledger: what ember added to which user message of a session.

The client never sees what ember appends to its request, so when it resends turn N as history
in turn N+1 the addition is missing. Unless ember puts the very same bytes back at the very
same place, the provider sees a different prefix from turn N on and the session pays a full
cache write every turn. Each entry records (message index, digest of the client's text of that
message, block); on every request the entries whose message is still there, unchanged, are
re-applied. Only a new ask gets a new entry — and it gets one even when nothing qualified
(an empty block), so a retried ask never retrieves again and changes its bytes.

Entries are kept in memory (an LRU of sessions) and in the project database, so a restarted
proxy still replays a live session's injections. A new entry is remembered at once and its row
queued to the database's one writer, not awaited: waiting for the commit put the writer's
queue (9 ms p50, 48 ms p99 with 8 agents) in front of every new ask. A database that refuses
the row at once (switched off, hold limit reached) raises, and the ask gets nothing; a
transient gap holds the row until the file is back. Only a row lost after it was queued (the
process killed, or the file failing for good before the commit) leaves a block this process
replays and a restart forgets: that session then pays one cache write, and the log says so.
The methods run on the event loop and never block it: file work is awaited in threads.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.errors import StorageUnavailable
from ember.store.driver import Connection
from ember.store.ops import Op, replayable
from ember.store.registry import Storage

log = logging.getLogger(__name__)


def _lost(written: Future[None], db: Path, session_id: str) -> None:
    """A queued row that was not written: this process still replays the block (module doc)."""
    exc = written.exception()
    if exc is not None:
        log.warning(
            "memory: the injection ledger row of session %s was not written to %s (%s); "
            "after a restart that session pays one cache write",
            session_id,
            db,
            exc,
        )


@replayable
def insert_entry(conn: Connection, args: Sequence[Any]) -> None:
    """One ledger row and its memories' links (``[row, members]``, as ``record`` makes
    them): an ``Op``, so a PostgreSQL store journals it through an outage and a restart."""
    row, members = args
    conn.execute(  # SQL both backends accept
        "INSERT INTO memory_injections (session_id, message_index, message_digest, "
        "block, memory_ids, created_at, busy) VALUES (?,?,?,?,?,?,?) "
        "ON CONFLICT DO NOTHING",
        tuple(row),
    )
    if members:  # each memory's way back to this ask (memory/injected.py)
        conn.executemany(
            "INSERT INTO memory_injected (memory_id, session_id, message_index, "
            "message_digest, created_at) VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING",
            [tuple(m) for m in members],
        )


@dataclass(frozen=True)
class LedgerEntry:
    message_index: int
    message_digest: str
    block: str
    memory_ids: tuple[str, ...] = ()
    #: the ask went on without memories because memory was at capacity (``AskGate``)
    busy: bool = False


def message_digest(index: int, text: str) -> str:
    """Identity of a user message: its position and its text (cache markers excluded — Claude
    Code moves its ``cache_control`` off a message once it is no longer the latest)."""
    return hashlib.sha256(f"{index}\x00{text}".encode()).hexdigest()[:32]


class InjectionLedger:
    """Per-session entries, cached in memory and persisted in the project's database."""

    def __init__(self, storage: Storage, sessions: int = 2048) -> None:
        self._storage = storage
        self._sessions: OrderedDict[tuple[Path, str], list[LedgerEntry]] = OrderedDict()
        self._max_sessions = sessions

    def cached(self, db: Path, session_id: str) -> list[LedgerEntry] | None:
        """The session's entries if they are in memory (no I/O: the request path's fast way)."""
        entries = self._sessions.get((db, session_id))
        if entries is None:
            return None
        self._sessions.move_to_end((db, session_id))
        return list(entries)

    async def entries(self, db: Path, session_id: str) -> list[LedgerEntry]:
        cached = self.cached(db, session_id)
        if cached is not None:
            return cached
        loaded = await self._load(db, session_id)
        self._remember((db, session_id), loaded)
        return list(loaded)

    async def record(self, db: Path, session_id: str, entry: LedgerEntry) -> None:
        """Remember ``entry`` and queue its row (module doc); raises ``StorageError`` when the
        database refuses the row at once — then nothing is remembered and the caller injects
        nothing. A store whose held writes outlive the process (``Database.durable_hold``:
        PostgreSQL's journal) takes the row while it is down, and a session it cannot load
        then starts from what this process remembers."""
        row = (
            session_id,
            entry.message_index,
            entry.message_digest,
            entry.block,
            json.dumps(list(entry.memory_ids)),
            time.time(),
            int(entry.busy),
        )

        members = [(m, *row[:3], row[5]) for m in entry.memory_ids] if entry.block else []
        insert = Op(insert_entry, [row, members])
        database = self._storage.database(db)
        if not database.health.ok and not database.durable_hold:
            raise StorageUnavailable(database.health.describe())
        key = (db, session_id)
        entries = self._sessions.get(key)
        if entries is None:
            try:
                entries = await self._load(db, session_id)
            except StorageUnavailable:
                if not database.durable_hold:
                    raise
                entries = []
        written = database.submit(insert, label="ledger")
        if written.done() and (refused := written.exception()) is not None:
            raise refused
        written.add_done_callback(lambda f: _lost(f, db, session_id))
        if entry not in entries:
            entries.append(entry)
        self._remember(key, entries)

    def _remember(self, key: tuple[Path, str], entries: list[LedgerEntry]) -> None:
        self._sessions[key] = entries
        self._sessions.move_to_end(key)
        while len(self._sessions) > self._max_sessions:
            self._sessions.popitem(last=False)

    async def _load(self, db: Path, session_id: str) -> list[LedgerEntry]:
        # A project without its file has no entries; on PostgreSQL no file is ever made.
        if not self._storage.postgres and not db.exists():
            return []

        def load(conn: Connection) -> list[LedgerEntry]:
            rows = conn.execute(
                "SELECT message_index, message_digest, block, memory_ids, busy "
                "FROM memory_injections WHERE session_id=? ORDER BY created_at, message_index",
                (session_id,),
            )
            return [
                LedgerEntry(r[0], r[1], r[2], tuple(json.loads(r[3])), bool(r[4])) for r in rows
            ]

        return await self._storage.database(db).aread(load)

    def close(self) -> None:
        self._sessions.clear()


@dataclass(frozen=True)
class AskCounts:
    """What the ledger says of a project's new asks (``ember stats``)."""

    asks: int
    with_memories: int
    busy: int

    def sentence(self) -> str:
        line = f"Memory: {self.asks} new asks, {self.with_memories} with memories injected"
        if self.busy:
            line += (
                f"; {self.busy} went on without them because memory was at capacity "
                "(memory_concurrent_asks, memory_cpu_share)"
            )
        return line + "."


def ask_counts(conn: Connection) -> AskCounts:
    asks, injected, busy = conn.execute(  # SQL both backends accept
        "SELECT COUNT(*), COUNT(*) FILTER (WHERE block != ''), COALESCE(SUM(busy), 0) "
        "FROM memory_injections"
    ).fetchone()
    return AskCounts(int(asks), int(injected), int(busy))

"""The injection ledger: what ember added to which user message of a session.

The client never sees what ember appends to its request, so when it resends turn N as history
in turn N+1 the addition is missing. Unless ember puts the very same bytes back at the very
same place, the provider sees a different prefix from turn N on and the session pays a full
cache write every turn. Each entry records (message index, digest of the client's text of that
message, block); on every request the entries whose message is still there, unchanged, are
re-applied. Only a new ask gets a new entry — and it gets one even when nothing qualified
(an empty block), so a retried ask never retrieves again and changes its bytes.

Entries are kept in memory (an LRU of sessions) and in the project database, so a restarted
proxy still replays a live session's injections.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from ember.store.db import connect, migrate
from ember.store.schema import MIGRATIONS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LedgerEntry:
    message_index: int
    message_digest: str
    block: str
    memory_ids: tuple[str, ...] = ()


def message_digest(index: int, text: str) -> str:
    """Identity of a user message: its position and its text (cache markers excluded — Claude
    Code moves its ``cache_control`` off a message once it is no longer the latest)."""
    return hashlib.sha256(f"{index}\x00{text}".encode()).hexdigest()[:32]


class InjectionLedger:
    """Per-session entries, cached in memory and persisted per project database."""

    def __init__(self, sessions: int = 2048, open_files: int = 16) -> None:
        self._sessions: OrderedDict[tuple[Path, str], list[LedgerEntry]] = OrderedDict()
        self._conns: OrderedDict[Path, sqlite3.Connection] = OrderedDict()
        self._max_sessions = sessions
        self._max_files = open_files
        self._lock = threading.Lock()

    def cached(self, db: Path, session_id: str) -> list[LedgerEntry] | None:
        """The session's entries if they are in memory (no I/O: the request path's fast way)."""
        with self._lock:
            entries = self._sessions.get((db, session_id))
            if entries is not None:
                self._sessions.move_to_end((db, session_id))
            return None if entries is None else list(entries)

    def entries(self, db: Path, session_id: str) -> list[LedgerEntry]:
        key = (db, session_id)
        with self._lock:
            cached = self._sessions.pop(key, None)
            if cached is None:
                cached = self._load(db, session_id)
            self._remember(key, cached)
            return list(cached)

    def record(self, db: Path, session_id: str, entry: LedgerEntry) -> None:
        with self._lock:
            key = (db, session_id)
            entries = self._sessions.pop(key, None)
            if entries is None:
                entries = self._load(db, session_id)
            entries.append(entry)
            self._remember(key, entries)
            conn = self._conn(db)
            with conn:
                conn.execute("BEGIN")
                conn.execute(
                    "INSERT OR IGNORE INTO memory_injections VALUES (?,?,?,?,?,?)",
                    (
                        session_id,
                        entry.message_index,
                        entry.message_digest,
                        entry.block,
                        json.dumps(list(entry.memory_ids)),
                        time.time(),
                    ),
                )

    def _remember(self, key: tuple[Path, str], entries: list[LedgerEntry]) -> None:
        self._sessions[key] = entries
        while len(self._sessions) > self._max_sessions:
            self._sessions.popitem(last=False)

    def _load(self, db: Path, session_id: str) -> list[LedgerEntry]:
        if not db.exists():
            return []
        rows = self._conn(db).execute(
            "SELECT message_index, message_digest, block, memory_ids FROM memory_injections "
            "WHERE session_id=? ORDER BY created_at, message_index",
            (session_id,),
        )
        return [LedgerEntry(r[0], r[1], r[2], tuple(json.loads(r[3]))) for r in rows]

    def _conn(self, db: Path) -> sqlite3.Connection:
        conn = self._conns.pop(db, None)
        if conn is None:
            conn = connect(db)
            migrate(conn, MIGRATIONS)
        self._conns[db] = conn
        while len(self._conns) > self._max_files:
            self._conns.popitem(last=False)[1].close()
        return conn

    def close(self) -> None:
        with self._lock:
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()
            self._sessions.clear()

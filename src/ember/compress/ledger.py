"""What ember sent in place of each tool output it shortened, per session: the ledger that keeps
the cached prefix byte for byte.

The client never sees the shortening: it sends the original output again as history on every
later request. Unless ember puts the very same bytes back at the same place, the provider sees
a new prefix from that message on and the session pays a full cache write each turn. Each
entry holds (the message it is in, the digest of the original as the client sends it, the
bytes sent instead); on every request the entries whose original is still there, unchanged,
are replayed. The entries live in memory (an LRU of sessions) and in the project database, so
a restarted proxy replays them too, and the originals stay there for ``ember_retrieve``.

Like the memory ledger, a new entry is remembered at once and its row queued to the
database's one writer (no ask waits for the commit); a row the database refuses at once means
the output goes out unshortened.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ember.errors import StorageUnavailable
from ember.store.driver import Connection
from ember.store.registry import Storage

log = logging.getLogger(__name__)
V = TypeVar("V")


@dataclass(frozen=True)
class Entry:
    """One shortened output: where it is, what it was (``digest``), what went instead."""

    ref: str
    message: int
    call_id: str | None
    digest: str
    shortened: str
    original_tokens: int
    shortened_tokens: int

    @property
    def saved_tokens(self) -> int:
        return max(0, self.original_tokens - self.shortened_tokens)


@dataclass(frozen=True)
class Original:
    """An output as the tool returned it, for ``ember_retrieve``."""

    ref: str
    session_id: str
    how: str
    text: str
    tool: str | None


def digest(call_id: str | None, text: str) -> str:
    """The identity of a tool output: the call it answers and its text as the client sent it
    (the same text answering another call is another output)."""
    return hashlib.sha256(f"{call_id or ''}\x00{text}".encode()).hexdigest()[:32]


def new_ref(session_id: str, output_digest: str) -> str:
    """A short ref, the same for the same output of the same session (a retried request
    shortens it to the very same bytes)."""
    return "c" + hashlib.sha256(f"{session_id}\x00{output_digest}".encode()).hexdigest()[:10]


class OutputLedger:
    """Per-session entries, cached in memory and persisted in the project's database."""

    def __init__(self, storage: Storage, sessions: int = 2048) -> None:
        self._storage = storage
        self._sessions: OrderedDict[tuple[Path, str], dict[str, Entry]] = OrderedDict()
        self._offered: OrderedDict[tuple[Path, str], bool] = OrderedDict()
        #: originals whose row is queued and not yet committed: a retrieval in the very
        #: exchange that shortened them (the model asks at once) must find them
        self._pending: dict[tuple[Path, str], Original] = {}
        self._max = sessions

    async def entries(self, db: Path, session_id: str) -> dict[str, Entry]:
        """The session's entries by digest."""
        key = (db, session_id)
        found = self._sessions.get(key)
        if found is None:
            found = await self._load(db, session_id)
            self._keep(self._sessions, key, found)
        else:
            self._sessions.move_to_end(key)
        return found

    async def record(
        self,
        db: Path,
        session_id: str,
        entry: Entry,
        *,
        tool: str | None,
        how: str,
        original: str,
        left_out: int,
    ) -> None:
        """Remember ``entry`` and queue its row; raises ``StorageError`` when the database
        refuses it at once (the caller then sends the output unshortened)."""
        row = (
            entry.ref,
            session_id,
            entry.digest,
            tool,
            how,
            original,
            entry.shortened,
            entry.original_tokens,
            entry.shortened_tokens,
            left_out,
            time.time(),
            entry.message,
            entry.call_id,
        )

        def insert(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO compress_outputs (ref, session_id, digest, tool, how, original, "
                "shortened, original_tokens, shortened_tokens, left_out, created_at, message, "
                "call_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                row,
            )

        database = self._storage.database(db)
        if not database.health.ok:
            raise StorageUnavailable(database.health.describe())
        entries = await self.entries(db, session_id)
        written = database.submit(insert, label="compress")
        if written.done() and (refused := written.exception()) is not None:
            raise refused
        key = (db, entry.ref)
        self._pending[key] = Original(entry.ref, session_id, how, original, tool)
        written.add_done_callback(lambda _: self._pending.pop(key, None))
        entries[entry.digest] = entry

    async def offered(self, db: Path, conversation: str, first: bool, can_offer: bool) -> bool:
        """Whether the conversation carries ``ember_retrieve``: decided once, by its first
        request (a conversation first seen later, or over a transport that cannot run it,
        never gets it: adding a tool mid-way would change the cached prefix)."""
        key = (db, conversation)
        known = self._offered.get(key)
        if known is not None:
            self._offered.move_to_end(key)
            return known
        database = self._storage.database(db)
        stored = await database.aread(lambda c: _offered(c, conversation))
        if stored is None:
            stored = first and can_offer
            now = time.time()
            database.submit(
                lambda c: c.execute(
                    "INSERT INTO compress_sessions (conversation, offered, created_at) "
                    "VALUES (?,?,?) ON CONFLICT DO NOTHING",
                    (conversation, int(stored), now),
                ),
                label="compress",
            )
        self._keep(self._offered, key, stored)
        return stored

    async def original(self, db: Path, ref: str) -> Original | None:
        """The output ``ref`` names in this project (None: none, or pruned)."""
        pending = self._pending.get((db, ref))
        if pending is not None:
            return pending
        return await self._storage.database(db).aread(lambda c: _original(c, ref))

    def retrieved(self, db: Path, ref: str, tokens: int) -> None:
        """Count a retrieval of ``ref`` (and the tokens it brought back) for the ledger."""
        self._storage.database(db).submit(
            lambda c: c.execute(
                "UPDATE compress_outputs SET retrieved = retrieved + 1, "
                "retrieved_tokens = retrieved_tokens + ? WHERE ref = ?",
                (tokens, ref),
            ),
            label="compress",
        )

    def _keep(self, lru: OrderedDict[tuple[Path, str], V], key: tuple[Path, str], v: V) -> None:
        lru[key] = v
        lru.move_to_end(key)
        while len(lru) > self._max:
            lru.popitem(last=False)

    async def _load(self, db: Path, session_id: str) -> dict[str, Entry]:
        if not self._storage.postgres and not db.exists():
            return {}

        def load(conn: Connection) -> dict[str, Entry]:
            rows = conn.execute(
                "SELECT ref, message, call_id, digest, shortened, original_tokens, "
                "shortened_tokens FROM compress_outputs WHERE session_id=?",
                (session_id,),
            )
            return {r[3]: Entry(r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows}

        return await self._storage.database(db).aread(load)


def prune(conn: Connection, older_than: float, keep_bytes: int) -> int:
    """Drop originals older than ``older_than`` (epoch seconds), then the oldest until the
    rest hold at most ``keep_bytes``; returns how many rows went. A session still running
    with a pruned output sends it as the client does (one cache write), and a retrieval of it
    says it is gone."""
    gone = conn.execute("DELETE FROM compress_outputs WHERE created_at < ?", (older_than,))
    count = int(gone.rowcount or 0)
    row = conn.execute(
        "SELECT created_at FROM (SELECT created_at, SUM(LENGTH(original) + LENGTH(shortened)) "
        "OVER (ORDER BY created_at DESC, ref) AS held FROM compress_outputs) AS sized "
        "WHERE held > ? ORDER BY created_at DESC LIMIT 1",
        (keep_bytes,),
    ).fetchone()
    if row is not None:
        over = conn.execute("DELETE FROM compress_outputs WHERE created_at <= ?", (row[0],))
        count += int(over.rowcount or 0)
    return count


def held(conn: Connection) -> tuple[int, int, float | None]:
    """(originals kept, their bytes with what was sent instead, the oldest one's time)."""
    row = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(LENGTH(original) + LENGTH(shortened)), 0), "
        "MIN(created_at) FROM compress_outputs"
    ).fetchone()
    return int(row[0]), int(row[1]), None if row[2] is None else float(row[2])


def _offered(conn: Connection, conversation: str) -> bool | None:
    row = conn.execute(
        "SELECT offered FROM compress_sessions WHERE conversation=?", (conversation,)
    ).fetchone()
    return None if row is None else bool(row[0])


def _original(conn: Connection, ref: str) -> Original | None:
    row = conn.execute(
        "SELECT ref, session_id, how, original, tool FROM compress_outputs WHERE ref=?", (ref,)
    ).fetchone()
    return None if row is None else Original(row[0], row[1], row[2], row[3], row[4])

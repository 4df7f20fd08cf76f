"""Secrets kept before ember masked them, masked once per project's store.

Every write masks secrets now (``memory.drafting``, ``store.transcript_rows``), but a store written
by an older ember may hold a password in a memory, a proposal or a transcript message — and a
memory is injected into later sessions and, on a team store, into every teammate's requests.
The first time a proxy opens such a store it masks what it finds, once (``memory_meta``
records that it ran): a current memory is rewritten through the store (its words and vector
re-indexed), one that is nothing but a secret is deleted, and the rows of the transcript and
the proposals are masked in place. Idempotent: a second run finds nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import partial
from typing import Any

from ember.memory.core import HierarchicalMemory
from ember.redaction import has_secret, mask, redact
from ember.store.driver import Connection

log = logging.getLogger(__name__)

#: ``memory_meta`` key set once the store was scrubbed (its value: the rule's version).
MARK = "secrets_masked"
VERSION = "1"
#: Tables whose text column may hold what a session said: (table, key column, text column).
_TEXT_TABLES = (
    ("transcript_messages", "seq", "content"),
    ("shadow_fact_proposals", "id", "content"),
    ("steward_facts", "id", "content"),
)
_PAGE = 500


def scrub(store: HierarchicalMemory) -> int:
    """Mask the secrets stored before masking was the rule; returns how many rows changed.
    Runs once per store (blocking: call it from a worker thread)."""
    db = store.database
    if db.read(_done):
        return 0
    changed = _memories(store)
    for table, key, column in _TEXT_TABLES:
        changed += _table(store, table, key, column)
    db.write(_mark, label="memory-scrub")
    if changed:
        log.warning(
            "memory: masked %d stored secret(s) in %s (written by an earlier ember; a memory "
            "never holds a key, a token or a password)",
            changed,
            store.path,
        )
    return changed


def _done(conn: Connection) -> bool:
    row = conn.execute("SELECT value FROM memory_meta WHERE key=?", (MARK,)).fetchone()
    return row is not None and str(row[0]) >= VERSION


def _mark(conn: Connection) -> None:
    conn.execute(
        "INSERT INTO memory_meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (MARK, VERSION),
    )


def _memories(store: HierarchicalMemory) -> int:
    changed = 0
    for m in store.list(include_history=True):
        found = redact(m.content)
        leaked = found.found or has_secret(repr(m.metadata))
        if not leaked:
            continue
        if found.only_secret:
            store.delete(m.id)
        else:
            store.update(m.id, content=found.text, metadata=m.metadata)
        changed += 1
    return changed


def _table(store: HierarchicalMemory, table: str, key: str, column: str) -> int:
    db = store.database
    changed = 0
    sql = f"UPDATE {table} SET {column} = ? WHERE {key} = ?"
    for batch in _pages(store, table, key, column):
        found = [(mask(text), k) for k, text in batch if has_secret(text)]
        if found:
            db.write(partial(_update, sql, found), label="memory-scrub")
            changed += len(found)
    return changed


def _pages(
    store: HierarchicalMemory, table: str, key: str, column: str
) -> Iterator[list[tuple[object, str]]]:
    after: object = None
    while True:
        where = "" if after is None else f"WHERE {key} > ?"
        sql = f"SELECT {key}, {column} FROM {table} {where} ORDER BY {key} LIMIT {_PAGE}"
        args = () if after is None else (after,)
        rows = store.database.read(partial(_select, sql, args))
        if not rows:
            return
        yield [(r[0], str(r[1] or "")) for r in rows]
        after = rows[-1][0]


def _update(sql: str, rows: list[tuple[str, object]], conn: Connection) -> None:
    conn.executemany(sql, rows)


def _select(sql: str, args: tuple[object, ...], conn: Connection) -> list[Any]:
    return list(conn.execute(sql, args).fetchall())

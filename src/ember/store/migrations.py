"""Bringing a database's schema up to date: one ordered list of named migrations per database.

Schema changes are an append-only list. Each migration is applied in one transaction together
with the row that records it, so a crash mid-migration leaves the database at the previous
version instead of half-changed; a migration is never edited once released (databases in the
field already recorded it by name) — a change is a new migration.

Only a database's owner (``store.database.Database``) runs ``migrate``, once, when it opens
the file: several owners each migrating the same file with their own list is how two lists
came to disagree about what a database contains.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from ember.store.driver import Connection, complete_statement


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str


@dataclass(frozen=True)
class Schema:
    """The ordered migrations of one kind of database (``project``, ``stats``)."""

    name: str
    migrations: tuple[Migration, ...]

    def __post_init__(self) -> None:
        names = [m.name for m in self.migrations]
        if len(names) != len(set(names)):
            raise ValueError(f"schema {self.name}: duplicate migration names in {names}")


def applied_migrations(conn: Connection) -> list[str]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    return [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]


def migrate(conn: Connection, migrations: Sequence[Migration]) -> list[str]:
    """Apply the migrations not yet recorded, in order; returns the names applied now."""
    done = set(applied_migrations(conn))
    applied: list[str] = []
    for m in migrations:
        if m.name in done:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have applied it while we waited for the write lock.
            if conn.execute("SELECT 1 FROM _migrations WHERE name=?", (m.name,)).fetchone():
                conn.execute("COMMIT")
                continue
            for statement in statements(m.sql):
                conn.execute(statement)
            conn.execute("INSERT INTO _migrations VALUES (?, ?)", (m.name, time.time()))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        applied.append(m.name)
    return applied


def statements(sql: str) -> list[str]:
    """Split a migration script into statements (``executescript`` would commit implicitly
    and break the one-transaction guarantee)."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out

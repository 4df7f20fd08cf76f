"""Opening a project database and bringing its schema up to date.

Schema changes are an append-only list of named migrations. Each is applied in one transaction
together with the row that records it, so a crash mid-migration leaves the database at the
previous version instead of half-changed; a migration is never edited once released (databases
in the field already recorded it by name) — a change is a new migration.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ember.errors import ProjectError


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """A connection in WAL mode (readers never block the single writer).

    ``check_same_thread`` is off because each connection is owned by one writer thread or
    one CLI call, never shared concurrently.
    """
    try:
        if readonly:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=5000")
        conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error as exc:
        raise ProjectError(f"cannot open database {path}: {exc}") from exc
    conn.row_factory = sqlite3.Row
    return conn


def applied_migrations(conn: sqlite3.Connection) -> list[str]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    return [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> list[str]:
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
            for statement in _statements(m.sql):
                conn.execute(statement)
            conn.execute("INSERT INTO _migrations VALUES (?, ?)", (m.name, time.time()))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        applied.append(m.name)
    return applied


def _statements(sql: str) -> list[str]:
    """Split a migration script into statements (``executescript`` would commit implicitly
    and break the one-transaction guarantee)."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out

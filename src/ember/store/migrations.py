"""Bringing a database's schema up to date: one ordered list of named migrations per database.

Schema changes are an append-only list. Each migration is applied in one transaction together
with the row that records it, so a crash mid-migration leaves the database at the previous
version instead of half-changed; a migration is never edited once released (databases in the
field already recorded it by name) — a change is a new migration.

A migration may carry a second form, ``postgres``: the same change for the PostgreSQL store
(types, views and triggers differ between the dialects, so each is written in full, never
translated by pattern: a pattern that misreads one statement builds a wrong schema). A
migration without it has no PostgreSQL form yet: a PostgreSQL database refuses a schema that
needs it (``store.pg.migrate``) and names it. The SQLite text of a released migration is never
edited to suit PostgreSQL.

Only a database's owner (``store.database.Database``) runs ``migrate``, once, when it opens
the file: several owners each migrating the same file with their own list is how two lists
came to disagree about what a database contains.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ember.store.driver import Connection, complete_statement

#: The public part (README, Adding a feature); the rest is internal.
__all__ = ["Migration", "Schema"]


@dataclass(frozen=True)
class Migration:
    name: str
    #: the SQLite statements (released: never edited)
    sql: str
    #: the same change for PostgreSQL, one script (None: not ported yet)
    postgres: str | None = None


class Schema:
    """The ordered migrations of one kind of database (``project``, ``stats``).

    ``migrations`` may be given as a function, called once on first use: the lists ember
    ships are put together from the registered features (``ember.features``), which must not
    be imported while ``ember.store`` itself is (a feature imports the store)."""

    def __init__(
        self,
        name: str,
        migrations: Sequence[Migration] | Callable[[], Sequence[Migration]],
    ) -> None:
        self.name = name
        self._source = migrations
        self._resolved: tuple[Migration, ...] | None = None
        if not callable(migrations):
            self._resolved = _checked(name, migrations)

    @property
    def migrations(self) -> tuple[Migration, ...]:
        if self._resolved is None:
            source = self._source
            assert callable(source)
            self._resolved = _checked(self.name, source())
        return self._resolved

    def __repr__(self) -> str:
        return f"Schema({self.name!r})"

    def unported(self) -> list[str]:
        """The names of the migrations with no PostgreSQL form yet, in order."""
        return [m.name for m in self.migrations if m.postgres is None]


def _checked(name: str, migrations: Sequence[Migration]) -> tuple[Migration, ...]:
    names = [m.name for m in migrations]
    if len(names) != len(set(names)):
        raise ValueError(f"schema {name}: duplicate migration names in {names}")
    return tuple(migrations)


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

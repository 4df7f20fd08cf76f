"""Bringing a project's PostgreSQL schema up to date: the same named migrations as its SQLite
file, in their ``postgres`` form (``store.migrations``).

Invariants, and what each prevents:

- Every transaction here first takes the schema's advisory lock (``pg_advisory_xact_lock``,
  released at its commit or rollback), then sets the schema as its ``search_path``
  (``SET LOCAL``). Several proxies starting at once on a new project therefore create the
  schema, its bookkeeping and each migration exactly once: without the lock two
  ``CREATE SCHEMA IF NOT EXISTS`` race into a unique violation, and two runners both see a
  migration missing and apply it twice.
- Each migration commits in one transaction with its row in ``_migrations``: a failure half
  way leaves the schema at the previous migration, never half changed.
- A schema that needs a migration with no PostgreSQL form is refused before anything is
  created, naming every such migration (``unported``): a feature's tables missing on the
  server would otherwise surface as "relation does not exist" inside a request.
- ``_ember_version`` holds one counter that every write transaction bumps
  (``bump_version``): ``PgDatabase.data_version`` reads it, so a cache keyed on it sees the
  commits of every process, in the same transaction as the change (never before it).
- ``_ember_delivered`` holds the key of each journaled write a transaction applied
  (``batch``, ``store.pg.journal``), for ``DELIVERED_DAYS``: a journal left by a stopped
  proxy is delivered once, when the next one starts within that time. Keys older than that
  are removed whenever a process opens the schema.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, Any, cast

from ember.errors import StorageError
from ember.store.migrations import Schema

if TYPE_CHECKING:
    import psycopg

#: How long a journaled write's key is kept after it was applied (``_ember_delivered``).
DELIVERED_DAYS = 7
#: The store's own tables in every schema, created once under the schema's lock.
_BOOKKEEPING = f"""
CREATE TABLE IF NOT EXISTS _migrations (
    name TEXT PRIMARY KEY,
    applied_at DOUBLE PRECISION NOT NULL,
    seq BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE TABLE IF NOT EXISTS _ember_version (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    n BIGINT NOT NULL
);
INSERT INTO _ember_version VALUES (TRUE, 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS _ember_delivered (
    key BIGINT PRIMARY KEY,
    at TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS _ember_delivered_at ON _ember_delivered (at);
DELETE FROM _ember_delivered WHERE at < now() - interval '{DELIVERED_DAYS} days';
"""
BUMP_VERSION = "UPDATE _ember_version SET n = n + 1"


def lock_key(schema: str) -> int:
    """The advisory lock of ``schema``: a signed 64-bit number of its name (stable across
    processes and versions, unlike Python's ``hash``)."""
    digest = hashlib.sha256(f"ember.schema:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def quoted(schema: str) -> str:
    """``schema`` as a quoted identifier (names come from ``pg.names``: ``[a-z0-9_]``)."""
    if not schema.replace("_", "").isalnum() or not schema.isascii() or schema != schema.lower():
        raise ValueError(f"not a schema name of ember's: {schema!r}")
    return f'"{schema}"'


def set_schema(schema: str) -> str:
    """The statement that makes the open transaction serve ``schema`` only (``SET LOCAL``: it
    ends with the transaction, so a pooled connection never carries it to the next user)."""
    return f"SET LOCAL search_path TO {quoted(schema)}"


def enter(conn: psycopg.Connection[Any], schema: str, *, lock: bool) -> None:
    """Make the open transaction of ``conn`` serve ``schema`` only, after taking the
    schema's lock when ``lock``."""
    if lock:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
    conn.execute(cast(Any, set_schema(schema)))


def require_ported(schema: Schema, where: str) -> None:
    """Raise ``StorageError`` naming the migrations of ``schema`` with no PostgreSQL form."""
    missing = schema.unported()
    if missing:
        raise StorageError(
            f"{where}: the {schema.name} schema needs migrations that have no PostgreSQL form "
            f"yet ({', '.join(missing)}); only the kernel's tables are on PostgreSQL so far"
        )


def applied(conn: psycopg.Connection[Any], schema: str) -> set[str]:
    """Create the schema and its bookkeeping if missing; the names of the migrations
    recorded there."""
    with conn.transaction():
        enter_new(conn, schema)
        conn.execute(cast(Any, _BOOKKEEPING))
        return {r[0] for r in conn.execute("SELECT name FROM _migrations").fetchall()}


def enter_new(conn: psycopg.Connection[Any], schema: str) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
    conn.execute(cast(Any, f"CREATE SCHEMA IF NOT EXISTS {quoted(schema)}"))
    enter(conn, schema, lock=False)


def migrate(conn: psycopg.Connection[Any], schema: str, migrations: Schema) -> list[str]:
    """Apply the migrations of ``migrations`` not yet recorded in ``schema``, each in one
    transaction with its record, under the schema's lock; returns the names applied now.
    ``conn`` is in autocommit mode (each block here is its own transaction)."""
    require_ported(migrations, schema)
    done = applied(conn, schema)
    now: list[str] = []
    for m in migrations.migrations:
        if m.name in done or m.postgres is None:
            continue
        with conn.transaction():
            enter(conn, schema, lock=True)
            # Another process may have applied it while we waited for the lock.
            if conn.execute("SELECT 1 FROM _migrations WHERE name = %s", (m.name,)).fetchone():
                continue
            conn.execute(cast(Any, m.postgres))
            conn.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (%s, %s)", (m.name, time.time())
            )
            conn.execute(BUMP_VERSION)
        now.append(m.name)
    return now

"""One read-modify-write at a time per schema, across every process of a PostgreSQL store.

On SQLite a write job runs alone: the file's one owner writes under ``BEGIN IMMEDIATE``, so a
job that reads a row, changes it in Python and writes it back (a lesson's count, shaping's
ledger, a TOIN pattern) never works from a row another process changed meanwhile. On
PostgreSQL several proxies write one schema at once under READ COMMITTED: two such jobs both
read the old row and the later commit overwrites the earlier one, and a count or a ledger
silently loses what the other process added.

``one_writer(conn)`` restores SQLite's guarantee for the job that calls it: on PostgreSQL it
takes a transaction-scoped advisory lock of the connection's schema (released at commit or
rollback), taken before the job's first read, so the read sees every commit of the job that
held it before. On SQLite it does nothing (the writer already runs alone).

One lock per schema, not per feature or row, and every write batch takes it first
(``batch.py``), so ``one_writer`` finds it held and costs nothing there. Taken mid-batch, it
deadlocked: a batch holding a memory counter's row lock waited for this lock while another
held this lock and waited for that row (the server aborts one, the batch retries as busy,
and the wait is a second). Taken first, two batches of one schema never hold locks in
opposite orders; SQLite's ``BEGIN IMMEDIATE`` serializes a file's batches the same way, and
the version bump every batch ends with serialized their commits already. Reads go on.
"""

from __future__ import annotations

from typing import Any

from ember.store.pg.connection import dialect

#: The lock's key is a 64-bit hash of the schema's name under this prefix (computed by the
#: server, which knows the transaction's ``search_path``).
WRITER_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('ember.rmw:' || current_schema(), 0))"


def one_writer(conn: Any) -> None:
    """Wait until no other transaction of this schema holds the writer lock, and hold it to
    the end of this one (PostgreSQL, unless the batch holds it already); nothing on SQLite."""
    if dialect(conn) == "postgres" and not getattr(conn, "writer_locked", False):
        conn.execute(WRITER_LOCK)

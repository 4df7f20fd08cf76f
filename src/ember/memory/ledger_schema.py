"""The injection ledger's table: what ember appended to which user message of a session."""

from __future__ import annotations

from ember.memory import schema_pg as pg
from ember.store.migrations import Migration

LEDGER: tuple[Migration, ...] = (
    Migration(
        "0002_memory_injections",
        """
        -- The injection ledger: what ember appended to which user message of a session, so
        -- every later request of the session carries the same bytes at the same place.
        CREATE TABLE memory_injections (
            session_id TEXT NOT NULL,
            message_index INTEGER NOT NULL,
            message_digest TEXT NOT NULL,
            block TEXT NOT NULL,
            memory_ids TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (session_id, message_index, message_digest)
        );
        """,
        postgres=pg.INJECTIONS,
    ),
    Migration(
        "0007_memory_injections_busy",
        """
        -- 1 for an ask that went on without memories because memory was at capacity (every
        -- search slot busy, or the searches' CPU share spent: memory/gate.py): what
        -- `ember stats` counts as turned away.
        ALTER TABLE memory_injections ADD COLUMN busy INTEGER NOT NULL DEFAULT 0;
        """,
        postgres=pg.INJECTIONS_BUSY,
    ),
    Migration(
        "0010_memory_injected",
        """
        -- One row per memory an ask's block carried (the ledger's memory_ids, one by one):
        -- how a memory's page finds the requests it went into without reading the whole
        -- ledger. `cited`: whether the answers after the ask cite it (memory/used.py), kept
        -- once those answers are all recorded; NULL until then. Rows the ledger already
        -- holds are added here.
        CREATE TABLE memory_injected (
            memory_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            message_index INTEGER NOT NULL,
            message_digest TEXT NOT NULL,
            created_at REAL NOT NULL,
            cited INTEGER,
            PRIMARY KEY (memory_id, session_id, message_index, message_digest)
        );
        INSERT INTO memory_injected
            (memory_id, session_id, message_index, message_digest, created_at)
        SELECT DISTINCT j.value, i.session_id, i.message_index, i.message_digest, i.created_at
        FROM memory_injections AS i, json_each(i.memory_ids) AS j
        WHERE json_valid(i.memory_ids) AND i.block != '';
        """,
        postgres=pg.INJECTED,
    ),
)

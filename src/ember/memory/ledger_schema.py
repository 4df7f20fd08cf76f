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
)

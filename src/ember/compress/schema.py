"""Compression's tables in the project database (both dialects).

``compress_outputs``: one row per tool output ember shortened in a session — the client's
original (for ``ember_retrieve``), the bytes sent instead (replayed on every later request:
the cached prefix never changes), what each holds in tokens (the savings ledger), and how
often it was retrieved. ``compress_sessions``: whether a conversation was offered
``ember_retrieve`` from its first request (its tool list must keep the same bytes ever after).
"""

from __future__ import annotations

from ember.store.migrations import Migration

COMPRESS: tuple[Migration, ...] = (
    Migration(
        "compress_0001_outputs",
        """
        CREATE TABLE compress_outputs (
            ref TEXT PRIMARY KEY CHECK (ref <> ''),
            session_id TEXT NOT NULL,
            digest TEXT NOT NULL,          -- of the output as the client sends it
            message INTEGER NOT NULL,      -- the conversation's message it is in
            call_id TEXT,
            tool TEXT,
            how TEXT NOT NULL CHECK (how IN ('records', 'regrouped', 'lines')),
            original TEXT NOT NULL,
            shortened TEXT NOT NULL,
            original_tokens INTEGER NOT NULL,
            shortened_tokens INTEGER NOT NULL,
            left_out INTEGER NOT NULL DEFAULT 0,
            retrieved INTEGER NOT NULL DEFAULT 0,
            retrieved_tokens INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL
        );
        CREATE UNIQUE INDEX compress_outputs_by_digest ON compress_outputs(session_id, digest);
        CREATE INDEX compress_outputs_by_age ON compress_outputs(created_at);
        CREATE TABLE compress_sessions (
            conversation TEXT PRIMARY KEY CHECK (conversation <> ''),
            offered INTEGER NOT NULL CHECK (offered IN (0, 1)),
            created_at REAL NOT NULL
        );
        """,
        postgres="""
        CREATE TABLE compress_outputs (
            ref TEXT PRIMARY KEY CHECK (ref <> ''),
            session_id TEXT NOT NULL,
            digest TEXT NOT NULL,
            message BIGINT NOT NULL,
            call_id TEXT,
            tool TEXT,
            how TEXT NOT NULL CHECK (how IN ('records', 'regrouped', 'lines')),
            original TEXT NOT NULL,
            shortened TEXT NOT NULL,
            original_tokens BIGINT NOT NULL,
            shortened_tokens BIGINT NOT NULL,
            left_out BIGINT NOT NULL DEFAULT 0,
            retrieved BIGINT NOT NULL DEFAULT 0,
            retrieved_tokens BIGINT NOT NULL DEFAULT 0,
            created_at DOUBLE PRECISION NOT NULL
        );
        CREATE UNIQUE INDEX compress_outputs_by_digest ON compress_outputs(session_id, digest);
        CREATE INDEX compress_outputs_by_age ON compress_outputs(created_at);
        CREATE TABLE compress_sessions (
            conversation TEXT PRIMARY KEY CHECK (conversation <> ''),
            offered INTEGER NOT NULL CHECK (offered IN (0, 1)),
            created_at DOUBLE PRECISION NOT NULL
        );
        """,
    ),
)

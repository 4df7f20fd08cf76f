"""TOIN's tables, in the global ``stats.db``: statistics of tool-output structures.

Global rather than per project: a pattern's key names no project (billing slice, model family,
structure hash), the limits (10k patterns / 128 MB) and ``ember toin publish`` are per
instance, and the rows hold counts and hashes only, so one file for all projects leaks
nothing across them.

Invariants the schema holds on its own: every key part is non-empty (an unknown slice is the
explicit ``'unknown'``), the structure hash is hex, and counts are never negative.

The ``postgres`` form (in the store's ``ember_home`` schema) holds the same: the hex
check is a regular expression (``!~``) where SQLite says ``NOT GLOB``, counts are ``BIGINT``
and the running sizes doubles, as SQLite's ``INTEGER`` and ``REAL`` are.
"""

from __future__ import annotations

from ember.store.migrations import Migration

TOIN: tuple[Migration, ...] = (
    Migration(
        "toin_0001_patterns",
        """
        CREATE TABLE toin_patterns (
            auth_mode TEXT NOT NULL CHECK (auth_mode <> ''),
            model_family TEXT NOT NULL CHECK (model_family <> ''),
            structure_hash TEXT NOT NULL
                CHECK (structure_hash <> '' AND structure_hash NOT GLOB '*[^0-9a-f]*'),
            kind TEXT NOT NULL,
            observations INTEGER NOT NULL DEFAULT 0 CHECK (observations >= 0),
            refetches INTEGER NOT NULL DEFAULT 0 CHECK (refetches >= 0),
            errors INTEGER NOT NULL DEFAULT 0 CHECK (errors >= 0),
            size_n INTEGER NOT NULL DEFAULT 0,
            size_mean REAL NOT NULL DEFAULT 0,
            size_m2 REAL NOT NULL DEFAULT 0,
            fields TEXT NOT NULL DEFAULT '{}',     -- {8-hex hash of a field name: count}
            queries TEXT NOT NULL DEFAULT '{}',    -- {"<hash>:* <hash>:*": count}
            instances TEXT NOT NULL DEFAULT '[]',  -- hashes of the instances that saw it
            user_count INTEGER NOT NULL DEFAULT 1,
            first_seen REAL NOT NULL,
            last_seen REAL NOT NULL,
            PRIMARY KEY (auth_mode, model_family, structure_hash)
        ) WITHOUT ROWID;
        CREATE INDEX toin_by_use ON toin_patterns(observations, last_seen);
        -- this instance's id (hashed before it leaves the file) and the exports imported
        CREATE TABLE toin_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        """,
        postgres="""
        CREATE TABLE toin_patterns (
            auth_mode TEXT NOT NULL CHECK (auth_mode <> ''),
            model_family TEXT NOT NULL CHECK (model_family <> ''),
            structure_hash TEXT NOT NULL
                CHECK (structure_hash <> '' AND structure_hash !~ '[^0-9a-f]'),
            kind TEXT NOT NULL,
            observations BIGINT NOT NULL DEFAULT 0 CHECK (observations >= 0),
            refetches BIGINT NOT NULL DEFAULT 0 CHECK (refetches >= 0),
            errors BIGINT NOT NULL DEFAULT 0 CHECK (errors >= 0),
            size_n BIGINT NOT NULL DEFAULT 0,
            size_mean DOUBLE PRECISION NOT NULL DEFAULT 0,
            size_m2 DOUBLE PRECISION NOT NULL DEFAULT 0,
            fields TEXT NOT NULL DEFAULT '{}',
            queries TEXT NOT NULL DEFAULT '{}',
            instances TEXT NOT NULL DEFAULT '[]',
            user_count BIGINT NOT NULL DEFAULT 1,
            first_seen DOUBLE PRECISION NOT NULL,
            last_seen DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (auth_mode, model_family, structure_hash)
        );
        CREATE INDEX toin_by_use ON toin_patterns(observations, last_seen);
        CREATE TABLE toin_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        """,
    ),
)

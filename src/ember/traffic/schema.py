"""Traffic learning's table: the sightings of each lesson, in the project's own ``ember.db``.

A lesson becomes a memory only at its second sighting, and ``ember wrap`` runs one proxy per
session: sightings kept in the proxy's memory died with it, so a lesson seen once per session
was never saved. Kept here, in the file of the project they were seen in, they outlive the
proxy and can never count toward another project (that project's rows are in another file).

Invariants the schema holds on its own:
- one row per lesson key, with a positive count and a known save state (0: pending, 1: saved,
  so a restart never saves the same lesson twice);
- ``evidence`` is a JSON array (the transcript pointers of its sightings, a few at most).

The ``postgres`` form holds the same invariants: ``IS JSON ARRAY`` is false, not
an error, for text that is not JSON at all, as ``json_valid`` is; times are doubles, as
SQLite's ``REAL``.

Bounds (rows per save state, age) are kept by ``ember.traffic.sightings.prune``; the indexes
are the ones its deletes walk.

``traffic_seen``: the messages each lesson was counted for (``Observation.pointer``), one row
per (lesson, message). A client resuming a session after a restart sends its whole history
again; a count kept in the proxy's memory forgot what it had counted, so a mistake made once
was counted a second time and saved as a lesson. Kept beside the lesson, the row outlives the
proxy: a message already counted is never counted again. Its rows go with their lesson's, and
each lesson keeps its most recent ``MAX_SEEN_PER_LESSON`` only (``sightings``).
"""

from __future__ import annotations

from ember.store.migrations import Migration

TRAFFIC: tuple[Migration, ...] = (
    Migration(
        "traffic_0001_sightings",
        """
        CREATE TABLE traffic_sightings (
            key TEXT PRIMARY KEY CHECK (key <> ''),
            category TEXT NOT NULL CHECK (category <> ''),
            content TEXT NOT NULL,                  -- the fact, as its first sighting said it
            count INTEGER NOT NULL CHECK (count >= 1),
            evidence TEXT NOT NULL DEFAULT '[]'
                CHECK (json_valid(evidence) AND json_type(evidence) = 'array'),
            saved INTEGER NOT NULL DEFAULT 0 CHECK (saved IN (0, 1)),
            first_seen REAL NOT NULL,
            last_seen REAL NOT NULL
        );
        CREATE INDEX traffic_sightings_by_state ON traffic_sightings(saved, last_seen);
        CREATE INDEX traffic_sightings_by_age ON traffic_sightings(last_seen);
        """,
        postgres="""
        CREATE TABLE traffic_sightings (
            key TEXT PRIMARY KEY CHECK (key <> ''),
            category TEXT NOT NULL CHECK (category <> ''),
            content TEXT NOT NULL,
            count BIGINT NOT NULL CHECK (count >= 1),
            evidence TEXT NOT NULL DEFAULT '[]' CHECK (evidence IS JSON ARRAY),
            saved INTEGER NOT NULL DEFAULT 0 CHECK (saved IN (0, 1)),
            first_seen DOUBLE PRECISION NOT NULL,
            last_seen DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX traffic_sightings_by_state ON traffic_sightings(saved, last_seen);
        CREATE INDEX traffic_sightings_by_age ON traffic_sightings(last_seen);
        """,
    ),
    Migration(
        "traffic_0002_seen",
        """
        CREATE TABLE traffic_seen (
            key TEXT NOT NULL CHECK (key <> ''),
            pointer TEXT NOT NULL CHECK (pointer <> ''),  -- the message it was counted for
            seen_at REAL NOT NULL,
            PRIMARY KEY (key, pointer)
        );
        CREATE INDEX traffic_seen_by_age ON traffic_seen(key, seen_at);
        """,
        postgres="""
        CREATE TABLE traffic_seen (
            key TEXT NOT NULL CHECK (key <> ''),
            pointer TEXT NOT NULL CHECK (pointer <> ''),
            seen_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (key, pointer)
        );
        CREATE INDEX traffic_seen_by_age ON traffic_seen(key, seen_at);
        """,
    ),
)

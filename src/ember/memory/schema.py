"""The memory tables, as their own append-only list of named migrations.

They live in the project's ``ember.db`` beside the accounting tables; names start with
``memory_`` so they can never collide with the accounting list (``0001_exchanges``...). The
vector index's ``vec0`` table is not here: it needs the sqlite-vec extension, which a
connection may lack, so the index creates it itself (see ``index/sqlite_vec.py``).

Invariants the schema holds on its own (even if Python code is wrong):
- ``seq`` is the internal key every index uses; ``id`` is the public id printed as ``[id]``.
- an evidence row points at exactly one of a message or a session, with a known kind;
- deleting a memory deletes its vector, its evidence and its entity links (true delete).
"""

from __future__ import annotations

from ember.memory import schema_pg as pg
from ember.store.migrations import Migration

MEMORY: tuple[Migration, ...] = (
    Migration(
        "memory_0001_core",
        """
        CREATE TABLE memories (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: index keys stay unique
            id TEXT NOT NULL UNIQUE,
            content TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            user_id TEXT,
            session_id TEXT,
            agent_id TEXT,
            turn_id TEXT,
            category TEXT,
            importance REAL NOT NULL CHECK (importance >= 0 AND importance <= 1),
            created_at REAL NOT NULL,
            valid_from REAL NOT NULL,
            valid_until REAL,
            supersedes TEXT,
            superseded_by TEXT,
            promoted_from TEXT,
            promotion_chain TEXT NOT NULL DEFAULT '[]',
            metadata TEXT NOT NULL DEFAULT '{}',
            access_count INTEGER NOT NULL DEFAULT 0,
            last_accessed REAL,
            embedder TEXT
        );
        CREATE INDEX memories_current ON memories(valid_until, created_at);
        CREATE INDEX memories_hash ON memories(content_hash);
        CREATE INDEX memories_promoted ON memories(promoted_from);
        -- Float32 vectors of current memories: exact re-ranking, and the source the hnsw
        -- fallback rebuilds from. A row here <=> the memory is current and embedded.
        CREATE TABLE memory_vectors (
            seq INTEGER PRIMARY KEY REFERENCES memories(seq) ON DELETE CASCADE,
            vector BLOB NOT NULL
        );
        -- BM25 over current memories (porter stemming: "running" finds "runs").
        CREATE VIRTUAL TABLE memory_fts USING fts5(content, tokenize = 'porter unicode61');
        CREATE TABLE memory_evidence (
            id INTEGER PRIMARY KEY,
            memory_seq INTEGER NOT NULL REFERENCES memories(seq) ON DELETE CASCADE,
            kind TEXT NOT NULL CHECK (kind IN
                ('user-stated', 'user-accepted', 'tool-verified', 'observed-outcome')),
            message_id TEXT,
            session_id TEXT,
            CHECK ((message_id IS NULL) <> (session_id IS NULL))
        );
        CREATE INDEX memory_evidence_memory ON memory_evidence(memory_seq);
        CREATE TABLE memory_entities (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL COLLATE NOCASE UNIQUE,
            kind TEXT,
            created_at REAL NOT NULL
        );
        CREATE TABLE memory_entity_links (
            memory_seq INTEGER NOT NULL REFERENCES memories(seq) ON DELETE CASCADE,
            entity_id INTEGER NOT NULL REFERENCES memory_entities(id) ON DELETE CASCADE,
            PRIMARY KEY (memory_seq, entity_id)
        );
        CREATE TABLE memory_relationships (
            id INTEGER PRIMARY KEY,
            source_id INTEGER NOT NULL REFERENCES memory_entities(id) ON DELETE CASCADE,
            relation TEXT NOT NULL,
            target_id INTEGER NOT NULL REFERENCES memory_entities(id) ON DELETE CASCADE,
            created_at REAL NOT NULL,
            UNIQUE (source_id, relation, target_id)
        );
        CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO memory_meta VALUES ('vector_generation', '0');
        """,
        postgres=pg.CORE,
    ),
    Migration(
        "memory_0002_turns",
        """
        -- The next turn of a conversation (the reply to a hit), one seek per hit.
        CREATE INDEX memories_turns ON memories(session_id, created_at, seq)
            WHERE category = 'turn' AND valid_until IS NULL;
        """,
        postgres=pg.TURNS,
    ),
    Migration(
        "memory_0003_vector_changes",
        """
        -- A number that moves with every change of memory_vectors, read in a search's own
        -- snapshot: a process keeping the vectors in memory (index/matrix.py) knows when
        -- its copy is stale without comparing rows. Other tables' commits (accounting, one
        -- per request) leave it alone, where PRAGMA data_version moves with every one.
        INSERT OR IGNORE INTO memory_meta VALUES ('vector_changes', '0');
        CREATE TRIGGER memory_vectors_added AFTER INSERT ON memory_vectors BEGIN
            UPDATE memory_meta SET value = CAST(value AS INTEGER) + 1
            WHERE key = 'vector_changes';
        END;
        CREATE TRIGGER memory_vectors_changed AFTER UPDATE ON memory_vectors BEGIN
            UPDATE memory_meta SET value = CAST(value AS INTEGER) + 1
            WHERE key = 'vector_changes';
        END;
        CREATE TRIGGER memory_vectors_removed AFTER DELETE ON memory_vectors BEGIN
            UPDATE memory_meta SET value = CAST(value AS INTEGER) + 1
            WHERE key = 'vector_changes';
        END;
        """,
        postgres=pg.VECTOR_CHANGES,
    ),
    Migration(
        "memory_0004_vector_added",
        """
        -- Two numbers that move with memory_vectors, read in a search's own snapshot: a
        -- process keeping the vectors in memory (index/matrix.py) knows when its copy is
        -- stale without comparing rows. vector_added counts new rows (their seqs are past
        -- every older one: AUTOINCREMENT), so the copy only appends them; vector_changes
        -- (memory_0003) now counts every other change (a row rewritten, replaced or removed),
        -- which reloads it. A database without vector_added is searched through its index.
        INSERT OR IGNORE INTO memory_meta VALUES ('vector_added', '0');
        DROP TRIGGER memory_vectors_added;
        CREATE TRIGGER memory_vectors_added AFTER INSERT ON memory_vectors BEGIN
            UPDATE memory_meta SET value = CAST(value AS INTEGER) + 1
            WHERE key = 'vector_added';
        END;
        -- INSERT OR REPLACE of a stored seq deletes the old row without a delete trigger.
        CREATE TRIGGER memory_vectors_replaced BEFORE INSERT ON memory_vectors
        WHEN EXISTS (SELECT 1 FROM memory_vectors WHERE seq = NEW.seq) BEGIN
            UPDATE memory_meta SET value = CAST(value AS INTEGER) + 1
            WHERE key = 'vector_changes';
        END;
        """,
        postgres=pg.VECTOR_ADDED,
    ),
)

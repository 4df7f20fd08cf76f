"""The ``postgres`` forms of the memory feature's migrations.

Each constant is the PostgreSQL side of the migration of the same name in ``schema.py`` or
``ledger_schema.py``, ending in the same tables, with what SQLite says implicitly said here:

- ``seq`` is an identity (``GENERATED ALWAYS``): a sequence never hands a number out twice,
  so index keys stay unique as ``AUTOINCREMENT`` keeps them.
- Times and scores are ``DOUBLE PRECISION`` (SQLite's ``REAL`` is a double): a memory read
  back from either backend ranks with the very same floats.
- The evidence CHECKs and every ``ON DELETE CASCADE`` are the same: a deleted memory takes its
  vector, evidence and entity links with it, whatever code deleted it.
- FTS5's table is ``index/pg_text.py``'s tables (``DDL``), which score as FTS5 does.
  ``memory_vec`` is not here: its dimension is the embedder's, so the index creates it
  (``index/pgvector.py``), as ``SqliteVecIndex`` creates its ``vec0`` table.
- ``memory_meta``'s ``vector_changes``/``vector_added`` move exactly when SQLite's triggers
  move them (``index/matrix.py`` trusts them to know its copy is stale), and one more case
  is counted as a change: a row inserted below a seq already stored. Several processes write
  one schema at once, and a transaction that took its seq first may commit last; counted as
  an addition, a copy that appends only past its last seq would miss that row for good. The
  insert trigger therefore locks the counters first, then looks (a new snapshot per
  statement under READ COMMITTED, so the look sees every commit before the lock). Every
  trigger locks both counters in one order (by key): two writers that each held one and
  waited for the other would deadlock (the server would then abort one, retried as busy).
"""

from __future__ import annotations

from ember.memory.index.pg_text import DDL as TEXT_INDEX_DDL

CORE = f"""
CREATE TABLE memories (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    content TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    user_id TEXT,
    session_id TEXT,
    agent_id TEXT,
    turn_id TEXT,
    category TEXT,
    importance DOUBLE PRECISION NOT NULL CHECK (importance >= 0 AND importance <= 1),
    created_at DOUBLE PRECISION NOT NULL,
    valid_from DOUBLE PRECISION NOT NULL,
    valid_until DOUBLE PRECISION,
    supersedes TEXT,
    superseded_by TEXT,
    promoted_from TEXT,
    promotion_chain TEXT NOT NULL DEFAULT '[]',
    metadata TEXT NOT NULL DEFAULT '{{}}',
    access_count BIGINT NOT NULL DEFAULT 0,
    last_accessed DOUBLE PRECISION,
    embedder TEXT
);
CREATE INDEX memories_current ON memories (valid_until, created_at);
CREATE INDEX memories_hash ON memories (content_hash);
CREATE INDEX memories_promoted ON memories (promoted_from);
CREATE TABLE memory_vectors (
    seq BIGINT PRIMARY KEY REFERENCES memories (seq) ON DELETE CASCADE,
    vector BYTEA NOT NULL
);
{TEXT_INDEX_DDL}
CREATE TABLE memory_evidence (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    memory_seq BIGINT NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN
        ('user-stated', 'user-accepted', 'tool-verified', 'observed-outcome')),
    message_id TEXT,
    session_id TEXT,
    CHECK ((message_id IS NULL) <> (session_id IS NULL))
);
CREATE INDEX memory_evidence_memory ON memory_evidence (memory_seq);
-- SQLite's COLLATE NOCASE UNIQUE: one entity per name whatever its case.
CREATE TABLE memory_entities (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL,
    kind TEXT,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE UNIQUE INDEX memory_entities_name ON memory_entities (lower(name));
CREATE TABLE memory_entity_links (
    memory_seq BIGINT NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
    entity_id BIGINT NOT NULL REFERENCES memory_entities (id) ON DELETE CASCADE,
    PRIMARY KEY (memory_seq, entity_id)
);
CREATE TABLE memory_relationships (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_id BIGINT NOT NULL REFERENCES memory_entities (id) ON DELETE CASCADE,
    relation TEXT NOT NULL,
    target_id BIGINT NOT NULL REFERENCES memory_entities (id) ON DELETE CASCADE,
    created_at DOUBLE PRECISION NOT NULL,
    UNIQUE (source_id, relation, target_id)
);
CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO memory_meta VALUES ('vector_generation', '0');
"""

TURNS = """
CREATE INDEX memories_turns ON memories (session_id, created_at, seq)
    WHERE category = 'turn' AND valid_until IS NULL;
"""

VECTOR_CHANGES = """
INSERT INTO memory_meta VALUES ('vector_changes', '0') ON CONFLICT (key) DO NOTHING;
CREATE FUNCTION memory_vectors_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM memory_meta WHERE key IN ('vector_added', 'vector_changes')
    ORDER BY key FOR UPDATE;
    UPDATE memory_meta SET value = (CAST(value AS BIGINT) + 1)::text
    WHERE key = 'vector_changes';
    RETURN NULL;
END $$;
CREATE TRIGGER memory_vectors_added AFTER INSERT ON memory_vectors
    FOR EACH ROW EXECUTE FUNCTION memory_vectors_changed();
CREATE TRIGGER memory_vectors_changed AFTER UPDATE ON memory_vectors
    FOR EACH ROW EXECUTE FUNCTION memory_vectors_changed();
CREATE TRIGGER memory_vectors_removed AFTER DELETE ON memory_vectors
    FOR EACH ROW EXECUTE FUNCTION memory_vectors_changed();
"""

# An upsert (ON CONFLICT DO UPDATE) of a stored seq fires the UPDATE trigger, never the
# INSERT one: SQLite's memory_vectors_replaced has nothing to catch here.
VECTOR_ADDED = """
INSERT INTO memory_meta VALUES ('vector_added', '0') ON CONFLICT (key) DO NOTHING;
CREATE FUNCTION memory_vectors_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM memory_meta WHERE key IN ('vector_added', 'vector_changes')
    ORDER BY key FOR UPDATE;
    IF EXISTS (SELECT 1 FROM memory_vectors WHERE seq > NEW.seq) THEN
        UPDATE memory_meta SET value = (CAST(value AS BIGINT) + 1)::text
        WHERE key = 'vector_changes';
    ELSE
        UPDATE memory_meta SET value = (CAST(value AS BIGINT) + 1)::text
        WHERE key = 'vector_added';
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER memory_vectors_added ON memory_vectors;
CREATE TRIGGER memory_vectors_added AFTER INSERT ON memory_vectors
    FOR EACH ROW EXECUTE FUNCTION memory_vectors_added();
"""

INJECTIONS = """
CREATE TABLE memory_injections (
    session_id TEXT NOT NULL,
    message_index INTEGER NOT NULL,
    message_digest TEXT NOT NULL,
    block TEXT NOT NULL,
    memory_ids TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, message_index, message_digest)
);
"""

INJECTIONS_BUSY = """
ALTER TABLE memory_injections ADD COLUMN busy INTEGER NOT NULL DEFAULT 0;
"""

INJECTED = """
CREATE TABLE memory_injected (
    memory_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    message_index INTEGER NOT NULL,
    message_digest TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    cited INTEGER,
    PRIMARY KEY (memory_id, session_id, message_index, message_digest)
);
INSERT INTO memory_injected (memory_id, session_id, message_index, message_digest, created_at)
SELECT DISTINCT j.value, i.session_id, i.message_index, i.message_digest, i.created_at
FROM memory_injections AS i CROSS JOIN LATERAL jsonb_array_elements_text(i.memory_ids::jsonb)
    AS j(value)
WHERE i.block != '';
"""

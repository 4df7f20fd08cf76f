"""The ``postgres`` forms of shadow memory's migrations.

Each constant is the PostgreSQL side of the migration of the same name in ``schema.py``,
ending in the same tables with the same names, columns and order, and holding the same
invariants on its own — what SQLite says implicitly is said here:

- ``transcript_messages.seq`` is an identity (``GENERATED ALWAYS``): a sequence never hands a
  number out twice, as ``AUTOINCREMENT`` never does, so a cursor (``through_seq``) never
  points at a message that was replaced. Evidence ids are identities too (SQLite's rowid).
- Times and costs are ``DOUBLE PRECISION`` (SQLite's ``REAL`` is a double; PostgreSQL's is 4
  bytes, which would move a timestamp by minutes); seqs and token counts are ``BIGINT``.
- The uniqueness that makes a resent transcript add nothing, every CHECK (roles, kinds,
  statuses, paths, one of message or session per evidence row) and every ``ON DELETE
  CASCADE`` are the same.
- The two triggers are plpgsql: the activation watermark refuses an update, and evidence of
  a valid proposal must point into the proposal's own session (a message of that session, or
  that session's id). Both raise ``integrity_constraint_violation`` (SQLSTATE 23000), which
  psycopg raises as an ``IntegrityError``, as SQLite's ``RAISE(ABORT)`` is one: a caller
  that tells a refused row from a broken store tells it the same way on both backends.
  Unqualified names in their bodies resolve under the project's ``search_path``, which the
  writing transaction sets, so a trigger never reads another project's rows.
"""

from __future__ import annotations

_KINDS = "('user-stated', 'user-accepted', 'tool-verified', 'observed-outcome')"
_STATUSES = "('running', 'completed', 'failed', 'cancelled', 'skipped')"

# The columns shadow_memory_runs and steward_runs share after their ``model``.
_RUN_TAIL = f"""
    status TEXT NOT NULL CHECK (status IN {_STATUSES}),
    reason TEXT,
    error TEXT,
    from_seq BIGINT,
    through_seq BIGINT,
    calls BIGINT NOT NULL DEFAULT 0,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    latency_ms DOUBLE PRECISION,
    estimated_usd DOUBLE PRECISION,
    price_snapshot TEXT,
    started_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION"""

# The columns shadow_fact_proposals and steward_facts share after their ``run_id``.
_FACT_TAIL = """
    session_id TEXT NOT NULL,
    content TEXT NOT NULL,
    category TEXT,
    evidence TEXT NOT NULL,
    validation_error TEXT,
    memory_id TEXT,
    created_at DOUBLE PRECISION NOT NULL"""

_EVIDENCE_TAIL = f"""
    kind TEXT NOT NULL CHECK (kind IN {_KINDS}),
    message_id TEXT,
    session_id TEXT,
    CHECK ((message_id IS NULL) <> (session_id IS NULL))"""

CORE = f"""
CREATE TABLE transcript_messages (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    position INTEGER NOT NULL,
    part INTEGER NOT NULL DEFAULT 0,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    kind TEXT NOT NULL CHECK (kind IN ('user', 'assistant', 'tool_result', 'tool_error')),
    digest TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    UNIQUE (session_id, generation, position, part, digest)
);
CREATE INDEX transcript_by_session ON transcript_messages (session_id, generation, seq);
CREATE TABLE shadow_activation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    through_seq BIGINT NOT NULL,
    activated_at DOUBLE PRECISION NOT NULL
);
CREATE FUNCTION shadow_activation_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the shadow activation watermark is written once'
        USING ERRCODE = 'integrity_constraint_violation';
END $$;
CREATE TRIGGER shadow_activation_once BEFORE UPDATE ON shadow_activation
    FOR EACH ROW EXECUTE FUNCTION shadow_activation_once();
CREATE TABLE shadow_cursors (
    session_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    baseline_seq BIGINT NOT NULL,
    initialization TEXT NOT NULL CHECK (initialization IN ('steward', 'enabled')),
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, generation)
);
CREATE TABLE shadow_memory_runs (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    path TEXT NOT NULL CHECK (path IN ('hot', 'cold')),
    trigger TEXT NOT NULL,
    model TEXT,{_RUN_TAIL}
);
CREATE INDEX shadow_runs_by_session ON shadow_memory_runs (session_id, generation, status);
CREATE TABLE shadow_fact_proposals (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES shadow_memory_runs (id) ON DELETE CASCADE,{_FACT_TAIL}
);
CREATE INDEX shadow_proposals_by_run ON shadow_fact_proposals (run_id);
CREATE TABLE shadow_proposal_evidence (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    proposal_id TEXT NOT NULL
        REFERENCES shadow_fact_proposals (id) ON DELETE CASCADE,{_EVIDENCE_TAIL}
);
-- SQLite's trigger, condition for condition: a missing proposal reads as a valid one of no
-- session, so its evidence is refused (the foreign key refuses it too).
CREATE FUNCTION shadow_evidence_own_session() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    owner TEXT;
    invalid TEXT;
BEGIN
    SELECT p.session_id, p.validation_error INTO owner, invalid
    FROM shadow_fact_proposals p WHERE p.id = NEW.proposal_id;
    IF invalid IS NULL AND (
        (NEW.message_id IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM transcript_messages t
            WHERE t.id = NEW.message_id AND t.session_id = owner))
        OR (NEW.session_id IS NOT NULL AND NEW.session_id IS DISTINCT FROM owner)
    ) THEN
        RAISE EXCEPTION 'shadow evidence must point into the proposal''s own session'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER shadow_evidence_own_session BEFORE INSERT ON shadow_proposal_evidence
    FOR EACH ROW EXECUTE FUNCTION shadow_evidence_own_session();
CREATE TABLE steward_runs (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    model TEXT,{_RUN_TAIL}
);
CREATE TABLE steward_digested (
    session_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    through_seq BIGINT NOT NULL,
    PRIMARY KEY (session_id, generation)
);
CREATE TABLE steward_facts (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES steward_runs (id) ON DELETE CASCADE,{_FACT_TAIL}
);
CREATE TABLE steward_fact_evidence (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    fact_id TEXT NOT NULL REFERENCES steward_facts (id) ON DELETE CASCADE,{_EVIDENCE_TAIL}
);
"""

LINEAGE = """
CREATE TABLE shadow_lineage (
    session_id TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    first_digest TEXT NOT NULL,
    request_count INTEGER NOT NULL,
    request_last_digest TEXT NOT NULL,
    recorded INTEGER NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
"""

STARTS = """
CREATE TABLE shadow_starts (
    session_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    through_seq BIGINT NOT NULL CHECK (through_seq >= 0),
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, generation)
);
"""

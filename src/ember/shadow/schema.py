"""Shadow memory's tables: the transcript, where each session's shadow has read to, its runs,
its proposals with their evidence — and the steward's, kept apart for the comparison.

Invariants the schema holds on its own (the service checks them first; these hold even if
the service is wrong):
- a transcript message is stored once: ``(session_id, generation, position, part, digest)``
  is unique, so a client resending its history adds nothing;
- an evidence row points at exactly one of a message or a session, with a known kind;
- evidence of a *valid* proposal (``validation_error IS NULL``) points into the proposal's
  own session: a message of another session, or another session's id, is refused by trigger —
  one session's shadow cannot see another's, so such a pointer is a hallucination or a mix-up,
  and must never become a fact. An invalid proposal keeps whatever it claimed (that is the
  comparison data: how often, and on which facts, the model invents evidence);
- the activation watermark is written once.

Each migration's PostgreSQL form is in ``schema_pg.py``, holding the same.
"""

from __future__ import annotations

from ember.shadow import schema_pg as pg
from ember.store.migrations import Migration

_KINDS = "('user-stated', 'user-accepted', 'tool-verified', 'observed-outcome')"

SHADOW: tuple[Migration, ...] = (
    Migration(
        "shadow_0001_core",
        f"""
        CREATE TABLE transcript_messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- the order ember first saw it, per project
            id TEXT NOT NULL UNIQUE,                -- what evidence points at: m:<id>
            session_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            position INTEGER NOT NULL,              -- the message's index in the conversation
            part INTEGER NOT NULL DEFAULT 0,        -- which piece of that message
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
            kind TEXT NOT NULL CHECK (kind IN ('user', 'assistant', 'tool_result', 'tool_error')),
            digest TEXT NOT NULL,
            content TEXT NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE (session_id, generation, position, part, digest)
        );
        CREATE INDEX transcript_by_session ON transcript_messages(session_id, generation, seq);
        CREATE TABLE shadow_activation (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            through_seq INTEGER NOT NULL,
            activated_at REAL NOT NULL
        );
        CREATE TRIGGER shadow_activation_once BEFORE UPDATE ON shadow_activation
        BEGIN SELECT RAISE(ABORT, 'the shadow activation watermark is written once'); END;
        CREATE TABLE shadow_cursors (
            session_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            baseline_seq INTEGER NOT NULL,
            initialization TEXT NOT NULL CHECK (initialization IN ('steward', 'enabled')),
            created_at REAL NOT NULL,
            PRIMARY KEY (session_id, generation)
        );
        CREATE TABLE shadow_memory_runs (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            path TEXT NOT NULL CHECK (path IN ('hot', 'cold')),
            trigger TEXT NOT NULL,
            model TEXT,
            status TEXT NOT NULL CHECK (status IN
                ('running', 'completed', 'failed', 'cancelled', 'skipped')),
            reason TEXT,
            error TEXT,
            from_seq INTEGER,
            through_seq INTEGER,
            calls INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            latency_ms REAL,
            estimated_usd REAL,
            price_snapshot TEXT,
            started_at REAL NOT NULL,
            finished_at REAL
        );
        CREATE INDEX shadow_runs_by_session ON shadow_memory_runs(session_id, generation, status);
        CREATE TABLE shadow_fact_proposals (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES shadow_memory_runs(id) ON DELETE CASCADE,
            session_id TEXT NOT NULL,
            content TEXT NOT NULL,
            category TEXT,
            evidence TEXT NOT NULL,                 -- the evidence as proposed (JSON)
            validation_error TEXT,
            memory_id TEXT,                         -- the memory it became (mode primary)
            created_at REAL NOT NULL
        );
        CREATE INDEX shadow_proposals_by_run ON shadow_fact_proposals(run_id);
        CREATE TABLE shadow_proposal_evidence (
            id INTEGER PRIMARY KEY,
            proposal_id TEXT NOT NULL REFERENCES shadow_fact_proposals(id) ON DELETE CASCADE,
            kind TEXT NOT NULL CHECK (kind IN {_KINDS}),
            message_id TEXT,
            session_id TEXT,
            CHECK ((message_id IS NULL) <> (session_id IS NULL))
        );
        CREATE TRIGGER shadow_evidence_own_session BEFORE INSERT ON shadow_proposal_evidence
        WHEN (SELECT validation_error FROM shadow_fact_proposals WHERE id = NEW.proposal_id)
             IS NULL
         AND ((NEW.message_id IS NOT NULL AND NOT EXISTS (
                 SELECT 1 FROM transcript_messages t JOIN shadow_fact_proposals p
                 ON p.id = NEW.proposal_id
                 WHERE t.id = NEW.message_id AND t.session_id = p.session_id))
           OR (NEW.session_id IS NOT NULL AND NEW.session_id IS NOT (
                 SELECT session_id FROM shadow_fact_proposals WHERE id = NEW.proposal_id)))
        BEGIN
            SELECT RAISE(ABORT, 'shadow evidence must point into the proposal''s own session');
        END;
        CREATE TABLE steward_runs (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            model TEXT,
            status TEXT NOT NULL CHECK (status IN
                ('running', 'completed', 'failed', 'cancelled', 'skipped')),
            reason TEXT,
            error TEXT,
            from_seq INTEGER,
            through_seq INTEGER,
            calls INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            latency_ms REAL,
            estimated_usd REAL,
            price_snapshot TEXT,
            started_at REAL NOT NULL,
            finished_at REAL
        );
        -- What the steward has digested, per generation (the seed's episode marks): shadow
        -- cursors initialised after it inherit it, and never move with it afterwards.
        CREATE TABLE steward_digested (
            session_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            through_seq INTEGER NOT NULL,
            PRIMARY KEY (session_id, generation)
        );
        CREATE TABLE steward_facts (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES steward_runs(id) ON DELETE CASCADE,
            session_id TEXT NOT NULL,
            content TEXT NOT NULL,
            category TEXT,
            evidence TEXT NOT NULL,
            validation_error TEXT,
            memory_id TEXT,
            created_at REAL NOT NULL
        );
        CREATE TABLE steward_fact_evidence (
            id INTEGER PRIMARY KEY,
            fact_id TEXT NOT NULL REFERENCES steward_facts(id) ON DELETE CASCADE,
            kind TEXT NOT NULL CHECK (kind IN {_KINDS}),
            message_id TEXT,
            session_id TEXT,
            CHECK ((message_id IS NULL) <> (session_id IS NULL))
        );
        """,
        postgres=pg.CORE,
    ),
    Migration(
        "shadow_0002_lineage",
        """
        -- Where each session's transcript stands (shadow/transcript.py Lineage), kept with
        -- the project so a restart continues the session instead of starting a generation:
        -- every 'ember wrap' is a new proxy process, and without this each resumed session
        -- re-recorded its whole history under new ids and left its unread backlog behind.
        CREATE TABLE shadow_lineage (
            session_id TEXT PRIMARY KEY,
            generation INTEGER NOT NULL,
            first_digest TEXT NOT NULL,
            request_count INTEGER NOT NULL,
            request_last_digest TEXT NOT NULL,
            recorded INTEGER NOT NULL,
            updated_at REAL NOT NULL
        );
        """,
        postgres=pg.LINEAGE,
    ),
    Migration(
        "shadow_0003_starts",
        """
        -- Where shadow memory starts reading each generation (cursors.mark_start): the
        -- history its first request seen with shadow memory on held, whoever recorded it.
        CREATE TABLE shadow_starts (
            session_id TEXT NOT NULL,
            generation INTEGER NOT NULL,
            through_seq INTEGER NOT NULL CHECK (through_seq >= 0),
            created_at REAL NOT NULL,
            PRIMARY KEY (session_id, generation)
        );
        """,
        postgres=pg.STARTS,
    ),
)

"""The accounting tables: one row per exchange, session totals as a view (never a counter)."""

from __future__ import annotations

from ember.store.migrations import Migration

ACCOUNTING: tuple[Migration, ...] = (
    Migration(
        "0001_exchanges",
        """
        CREATE TABLE exchanges (
            id INTEGER PRIMARY KEY,
            ts REAL NOT NULL,
            session_id TEXT NOT NULL,
            project TEXT,
            protocol TEXT NOT NULL,
            model TEXT,
            status INTEGER NOT NULL,
            outcome TEXT NOT NULL,
            stream INTEGER NOT NULL,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            usage_known INTEGER NOT NULL,
            cost_usd REAL,
            price_snapshot TEXT NOT NULL,
            latency_ms REAL NOT NULL,
            ttfb_ms REAL
        );
        CREATE INDEX exchanges_session ON exchanges(session_id, ts);
        -- Derived, never stored: a counter kept beside its rows drifts from them.
        -- cost_usd is NULL as soon as one exchange of the session has no price.
        CREATE VIEW session_totals AS
        SELECT session_id,
               MAX(project) AS project,
               MIN(ts) AS first_seen,
               MAX(ts) AS last_seen,
               GROUP_CONCAT(DISTINCT model) AS models,
               COUNT(*) AS requests,
               SUM(input_tokens) AS input_tokens,
               SUM(cache_read_tokens) AS cache_read_tokens,
               SUM(cache_write_tokens) AS cache_write_tokens,
               SUM(output_tokens) AS output_tokens,
               CASE WHEN COUNT(cost_usd) = COUNT(*) THEN SUM(cost_usd) END AS cost_usd,
               SUM(cost_usd) AS priced_cost_usd,
               COUNT(*) - COUNT(cost_usd) AS unpriced_requests
        FROM exchanges GROUP BY session_id;
        """,
    ),
    Migration(
        "0003_exchanges_thread_origin",
        """
        -- Which conversation of the session (ember.threads): the user's own (main), a
        -- sub-agent, or a side request (title generation...). Rows from before: unknown.
        ALTER TABLE exchanges ADD COLUMN thread TEXT;
        ALTER TABLE exchanges ADD COLUMN thread_kind TEXT;
        -- Who made the call: the client ('client') or ember on its own (shadow memory, the
        -- steward...), so a session's totals stay the user's own spend.
        ALTER TABLE exchanges ADD COLUMN origin TEXT NOT NULL DEFAULT 'client';
        -- The provider's error type for an answer that failed after a 200 (overloaded_error...):
        -- the type only, never the message, which can echo the request.
        ALTER TABLE exchanges ADD COLUMN error_type TEXT;
        """,
    ),
    Migration(
        "0004_session_totals_client_only",
        """
        -- A session's totals are what its client asked for; calls ember made on its own
        -- (origin != 'client': owned-tool rounds, shadow memory, the steward) are reported
        -- apart, by origin, in spend_by_origin.
        DROP VIEW session_totals;
        CREATE VIEW session_totals AS
        SELECT session_id,
               MAX(project) AS project,
               MIN(ts) AS first_seen,
               MAX(ts) AS last_seen,
               GROUP_CONCAT(DISTINCT model) AS models,
               COUNT(*) AS requests,
               SUM(input_tokens) AS input_tokens,
               SUM(cache_read_tokens) AS cache_read_tokens,
               SUM(cache_write_tokens) AS cache_write_tokens,
               SUM(output_tokens) AS output_tokens,
               CASE WHEN COUNT(cost_usd) = COUNT(*) THEN SUM(cost_usd) END AS cost_usd,
               SUM(cost_usd) AS priced_cost_usd,
               COUNT(*) - COUNT(cost_usd) AS unpriced_requests
        FROM exchanges WHERE origin = 'client' GROUP BY session_id;
        CREATE VIEW spend_by_origin AS
        SELECT session_id,
               origin,
               COUNT(*) AS requests,
               SUM(input_tokens) AS input_tokens,
               SUM(cache_read_tokens) AS cache_read_tokens,
               SUM(cache_write_tokens) AS cache_write_tokens,
               SUM(output_tokens) AS output_tokens,
               CASE WHEN COUNT(cost_usd) = COUNT(*) THEN SUM(cost_usd) END AS cost_usd
        FROM exchanges GROUP BY session_id, origin;
        """,
    ),
    Migration(
        "0005_exchanges_by_time",
        """
        -- Shadow memory's budget reads a project's spend over the last 7 days (shadow/spend.py):
        -- without this, every run scanned the whole table.
        CREATE INDEX exchanges_by_time ON exchanges(ts);
        """,
    ),
    Migration(
        "0006_exchanges_usage_estimated",
        """
        -- 1: the provider reported no usage (an OpenAI Chat stream requested without
        -- stream_options.include_usage) and the token columns (and the cost priced from them)
        -- are ember's estimate (ember/usage_estimate.py), never the provider's count.
        ALTER TABLE exchanges ADD COLUMN usage_estimated INTEGER NOT NULL DEFAULT 0;
        -- A session's totals say how many of its requests are estimates.
        DROP VIEW session_totals;
        CREATE VIEW session_totals AS
        SELECT session_id,
               MAX(project) AS project,
               MIN(ts) AS first_seen,
               MAX(ts) AS last_seen,
               GROUP_CONCAT(DISTINCT model) AS models,
               COUNT(*) AS requests,
               SUM(input_tokens) AS input_tokens,
               SUM(cache_read_tokens) AS cache_read_tokens,
               SUM(cache_write_tokens) AS cache_write_tokens,
               SUM(output_tokens) AS output_tokens,
               CASE WHEN COUNT(cost_usd) = COUNT(*) THEN SUM(cost_usd) END AS cost_usd,
               SUM(cost_usd) AS priced_cost_usd,
               COUNT(*) - COUNT(cost_usd) AS unpriced_requests,
               SUM(usage_estimated) AS estimated_requests
        FROM exchanges WHERE origin = 'client' GROUP BY session_id;
        """,
    ),
    Migration(
        "0008_spend_hours",
        """
        -- The spend of each hour by who paid (the clients, or ember's extraction calls:
        -- shadow, steward) and protocol, as sums of the rows' own columns. Shadow memory's
        -- budget reads 7 days of spend before every run: summed from the rows, that was
        -- 10 ms at 10k requests a week and 210 ms at 100k (shadow/spend.py). Kept by the
        -- trigger in the transaction that inserts the row, so it cannot drift from the rows
        -- (accounting rows are never updated or deleted); weights are applied when read.
        CREATE TABLE spend_hours (
            hour INTEGER NOT NULL,
            extraction INTEGER NOT NULL,
            protocol TEXT NOT NULL,
            calls INTEGER NOT NULL,
            priced INTEGER NOT NULL,
            usd REAL NOT NULL,
            input_tokens INTEGER NOT NULL,
            cache_read_tokens INTEGER NOT NULL,
            cache_write_tokens INTEGER NOT NULL,
            cache_write_1h_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            PRIMARY KEY (hour, extraction, protocol)
        ) WITHOUT ROWID;
        INSERT INTO spend_hours
        SELECT CAST(ts / 3600 AS INTEGER), origin IN ('shadow', 'steward'), protocol,
               COUNT(*), COUNT(cost_usd), COALESCE(SUM(cost_usd), 0),
               SUM(input_tokens), SUM(cache_read_tokens), SUM(cache_write_tokens),
               SUM(cache_write_1h_tokens), SUM(output_tokens)
        FROM exchanges WHERE origin IN ('client', 'shadow', 'steward')
        GROUP BY 1, 2, 3;
        CREATE TRIGGER exchanges_spend_hours AFTER INSERT ON exchanges
        WHEN NEW.origin IN ('client', 'shadow', 'steward')
        BEGIN
            INSERT INTO spend_hours VALUES (
                CAST(NEW.ts / 3600 AS INTEGER), NEW.origin IN ('shadow', 'steward'),
                NEW.protocol, 1, NEW.cost_usd IS NOT NULL, COALESCE(NEW.cost_usd, 0),
                NEW.input_tokens, NEW.cache_read_tokens, NEW.cache_write_tokens,
                NEW.cache_write_1h_tokens, NEW.output_tokens
            )
            ON CONFLICT (hour, extraction, protocol) DO UPDATE SET
                calls = calls + 1,
                priced = priced + excluded.priced,
                usd = usd + excluded.usd,
                input_tokens = input_tokens + excluded.input_tokens,
                cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
                cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
                cache_write_1h_tokens = cache_write_1h_tokens + excluded.cache_write_1h_tokens,
                output_tokens = output_tokens + excluded.output_tokens;
        END;
        """,
    ),
    Migration(
        "0009_exchanges_notes",
        """
        -- What ember's stages did to the exchange, as a small JSON object by stage name (the
        -- verbosity level shaping set, the memories injected and their bytes...), for the
        -- dashboard; never content, never credentials. NULL: nothing was changed.
        ALTER TABLE exchanges ADD COLUMN notes TEXT;
        """,
    ),
)

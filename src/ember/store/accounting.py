"""Per-exchange accounting rows, and the reads ``ember stats`` makes of them.

Rows are written by the database's own writer (``Database.submit``), batched with whatever
else is queued: the proxy never waits on disk to answer a client, and a burst of answers
commits in one transaction. Accounting is observation — a failed write is reported through
the database's health and never breaks a request — but nothing accepted is dropped silently:
rows stay queued until committed, a clean stop commits them, and a ``kill -9`` loses at most
the rows queued after the last commit (the writer commits as soon as it is free).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.protocols.base import Usage
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.ops import Op, replayable
from ember.store.schema import PROJECT, STATS

_INSERT = """INSERT INTO exchanges (ts, session_id, project, protocol, model, status, outcome,
    stream, input_tokens, cache_read_tokens, cache_write_tokens, cache_write_1h_tokens,
    output_tokens, usage_known, cost_usd, price_snapshot, latency_ms, ttfb_ms, thread,
    thread_kind, origin, error_type, usage_estimated, notes)
    VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"""


@dataclass(frozen=True)
class ExchangeRecord:
    """One exchange as the client saw it: ``status`` is the HTTP status the client got (a 200
    whose body or stream holds an error stays 200, the provider's error type is
    ``error_type``), ``stream`` whether the client asked for a stream. ``usage_estimated``: the
    provider reported no usage and the token counts are ember's estimate
    (``ember.usage_estimate``)."""

    ts: float
    session_id: str
    project: str | None
    protocol: str
    model: str | None
    status: int
    outcome: str
    stream: bool
    usage: Usage | None
    cost_usd: float | None
    price_snapshot: str
    latency_ms: float
    ttfb_ms: float | None
    thread: str | None = None
    thread_kind: str | None = None
    origin: str = "client"
    error_type: str | None = None
    usage_estimated: bool = False
    #: ``Exchange.notes`` as JSON, or None when no stage changed anything
    notes: str | None = None

    def row(self) -> tuple[Any, ...]:
        u = self.usage or Usage()
        return (
            self.ts,
            self.session_id,
            self.project,
            self.protocol,
            self.model,
            self.status,
            self.outcome,
            int(self.stream),
            u.input_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
            u.cache_write_1h_tokens,
            u.output_tokens,
            int(self.usage is not None),
            self.cost_usd,
            self.price_snapshot,
            self.latency_ms,
            self.ttfb_ms,
            self.thread,
            self.thread_kind,
            self.origin,
            self.error_type,
            int(self.usage_estimated),
            self.notes,
        )

    @property
    def insert(self) -> Op:
        """The write job for this row (runs on the database's writer thread): an ``Op``, so
        a PostgreSQL store can journal it through an outage and a restart."""
        return Op(insert_row, self.row())


@replayable
def insert_row(conn: Connection, row: Sequence[Any]) -> None:
    """One accounting row (``ExchangeRecord.row``)."""
    conn.execute(_INSERT, tuple(row))


def _schema_for(path: Path) -> Any:
    return STATS if path.name == "stats.db" else PROJECT


def _query(path: Path, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Rows of ``sql`` from the file at ``path`` (its own short-lived owner: the CLI and
    tests); an empty list when the file does not exist. Raises ``StorageUnavailable`` with
    what to do when the file is damaged."""
    if not path.is_file():
        return []
    db = Database(path, _schema_for(path), log_failures=False)
    try:
        return db.read(lambda conn: [dict(r) for r in conn.execute(sql, args)])
    finally:
        db.close()


_SESSIONS = "SELECT * FROM session_totals ORDER BY last_seen DESC"
_OWN = (
    "SELECT origin, COUNT(*) AS requests, SUM(input_tokens) AS input_tokens, "
    "SUM(cache_read_tokens) AS cache_read_tokens, "
    "SUM(cache_write_tokens) AS cache_write_tokens, SUM(output_tokens) AS output_tokens, "
    "CASE WHEN COUNT(cost_usd) = COUNT(*) THEN SUM(cost_usd) END AS cost_usd "
    "FROM exchanges WHERE origin != 'client' AND ts >= ? GROUP BY origin ORDER BY origin"
)


def session_totals(path: Path) -> list[dict[str, Any]]:
    """Per-session totals, most recent first; an empty list when nothing was recorded."""
    return _query(path, _SESSIONS)


def sessions_of(conn: Connection) -> list[dict[str, Any]]:
    """``session_totals`` through a connection of the database's owner (either backend)."""
    return [dict(r) for r in conn.execute(_SESSIONS)]


def own_spend(path: Path, since: float | None = None) -> list[dict[str, Any]]:
    """What ember spent on its own (shadow memory, the steward, owned-tool rounds, learn),
    per origin, never folded into a session's totals; cost is None when any call of that
    origin has no price. ``since``: only calls made at or after it."""
    return _query(path, _OWN, (_since(since),))


def own_spend_of(conn: Connection, since: float | None = None) -> list[dict[str, Any]]:
    """``own_spend`` through a connection of the database's owner (either backend)."""
    return [dict(r) for r in conn.execute(_OWN, (_since(since),))]


def _since(since: float | None) -> float:
    return since if since is not None else float("-inf")


#: Every call of a file, by origin (the client's, then ember's own: shadow, steward...).
_BY_ORIGIN = (
    "SELECT origin, COUNT(*) AS requests, SUM(input_tokens) AS input_tokens, "
    "SUM(cache_read_tokens) AS cache_read_tokens, SUM(cache_write_tokens) AS cache_write_tokens, "
    "SUM(output_tokens) AS output_tokens, "
    "CASE WHEN COUNT(cost_usd) = COUNT(*) THEN SUM(cost_usd) END AS cost_usd, "
    "COUNT(*) - COUNT(cost_usd) AS unpriced_requests, MIN(ts) AS first_ts, MAX(ts) AS last_ts "
    "FROM exchanges GROUP BY origin ORDER BY origin"
)


def totals_by_origin(conn: Connection) -> list[dict[str, Any]]:
    """Requests, tokens and cost of every call recorded in the file of ``conn``, one row per
    origin; cost is None for an origin with any unpriced call (never a partial sum shown as
    the whole). Takes a connection, so a process that owns the file reads through its owner
    (a second owner of one file in a process is what ``ember.store`` forbids)."""
    return [dict(r) for r in conn.execute(_BY_ORIGIN)]


def exchanges(path: Path, session_id: str | None = None) -> list[dict[str, Any]]:
    if session_id:
        return _query(path, "SELECT * FROM exchanges WHERE session_id=? ORDER BY id", (session_id,))
    return _query(path, "SELECT * FROM exchanges ORDER BY id")


_SAVINGS_COLUMNS = (
    "SELECT id, ts, session_id, thread, origin, model, outcome, usage_known, input_tokens, "
    "cache_read_tokens, cache_write_tokens, cache_write_1h_tokens, output_tokens, cost_usd, "
    "notes FROM exchanges"
)


def savings_rows(
    conn: Connection, since: float | None = None, session_id: str | None = None
) -> list[dict[str, Any]]:
    """The rows the savings ledger reads (``ember.savings``): every row of each session that
    has one at or after ``since`` (all rows when None) — a session's earlier rows say which
    memory blocks its later requests re-read — or the rows of one session."""
    args: tuple[Any, ...] = ()
    if session_id is not None:
        sql, args = f"{_SAVINGS_COLUMNS} WHERE session_id = ?", (session_id,)
    elif since is not None:
        sql = (
            f"{_SAVINGS_COLUMNS} WHERE session_id IN "
            "(SELECT DISTINCT session_id FROM exchanges WHERE ts >= ?)"
        )
        args = (since,)
    else:
        sql = _SAVINGS_COLUMNS
    return [dict(r) for r in conn.execute(sql, args)]

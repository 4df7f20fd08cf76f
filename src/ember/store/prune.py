"""Retention: what one database loses when rows older than a cutoff are pruned (SQL only).

``ember store prune --older-than 90d`` and the proxy's daily run (``store_retention_days``)
run ``prune_database`` as one write job per database, on SQLite and PostgreSQL alike:

- ``exchanges`` older than the cutoff, which is moved back to a whole UTC hour, and the
  hourly sums of those hours (``spend_hours``): what remains of the sums is exactly the sum
  of the rows that remain, so ``ember stats``, budgets and the dashboard agree whichever
  they read. (``session_totals`` and ``spend_by_origin`` are views: they follow the rows.)
- the transcript, the memory injection ledger (``memory_injections``, ``memory_injected``)
  of sessions quiet since before the cutoff: a session still going keeps all of it, so a
  long conversation is never cut in half under shadow memory or the prompt cache;
- shadow memory's and the steward's runs started before the cutoff, with their proposals
  and evidence, except each session's last completed run (where its reading stopped);
- compression's originals (``compress_outputs``) older than the cutoff.

Invariants, and what each prevents:

- Memories, their evidence, vectors and entities are never pruned, and neither is a
  transcript message any evidence points at (a memory's, or a kept run's proposal's):
  "why do you believe this" keeps its answer for as long as the memory lives.
- A session's reading position stays where it was (its last completed run, its cursor, its
  start and lineage are kept: they are one row per session): a session resumed after a prune
  is read from where shadow memory stopped, not from its start again at the user's cost.
- The cutoff is at least ``MIN_DAYS`` ago: budgets read this month's spend from these rows,
  and a prune into the month would let a project spend its limit twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ember.store.pg.connection import dialect

#: Budgets read the current UTC month (at most 31 days) from the accounting rows.
MIN_DAYS = 32
HOUR = 3600
DAY = 86_400

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([dw]?)\s*$", re.IGNORECASE)


def parse_days(text: str) -> float:
    """``90d``, ``12w`` or ``90`` (days) as days; ``ValueError`` saying what to write."""
    found = _DURATION.match(text)
    if found is None:
        raise ValueError(f"{text!r} is not an age: write it as 90d (days) or 12w (weeks)")
    days = float(found[1]) * (7 if found[2].lower() == "w" else 1)
    check_days(days)
    return days


def check_days(days: float) -> None:
    if days < MIN_DAYS:
        raise ValueError(
            f"{days:g} days is too recent: rows are kept at least {MIN_DAYS} days, because "
            "budgets read this month's spend from them"
        )


def cutoff_for(now: float, days: float) -> float:
    """The cutoff ``days`` before ``now``, moved back to the start of its UTC hour."""
    return float(int((now - days * DAY) // HOUR) * HOUR)


def _has(conn: Any, table: str) -> bool:
    if dialect(conn) == "postgres":
        sql = "SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = ?"
    else:
        sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return conn.execute(sql, (table,)).fetchone() is not None


def _count(cur: Any) -> int:
    return max(0, int(cur.rowcount or 0))


#: each session's last completed run of a runs table (kept: where its reading stopped)
_LAST_DONE = (
    "EXISTS (SELECT 1 FROM {runs} k WHERE k.session_id = r.session_id "
    "AND k.generation = r.generation AND k.status = 'completed' "
    "AND (COALESCE(k.through_seq, -1) > COALESCE(r.through_seq, -1) "
    "OR (COALESCE(k.through_seq, -1) = COALESCE(r.through_seq, -1) AND k.id > r.id)))"
)
#: (runs, facts, fact key in evidence, evidence)
_RUNS = (
    ("shadow_memory_runs", "shadow_fact_proposals", "proposal_id", "shadow_proposal_evidence"),
    ("steward_runs", "steward_facts", "fact_id", "steward_fact_evidence"),
)


def _runs(conn: Any, cutoff: float, out: dict[str, int]) -> None:
    for runs, facts, key, evidence in _RUNS:
        if not (_has(conn, runs) and _has(conn, facts) and _has(conn, evidence)):
            continue
        old = (
            f"SELECT r.id FROM {runs} r WHERE r.started_at < ? AND "
            f"(r.status <> 'completed' OR {_LAST_DONE.format(runs=runs)})"
        )
        their = f"SELECT id FROM {facts} WHERE run_id IN ({old})"
        sql = f"DELETE FROM {evidence} WHERE {key} IN ({their})"
        out[evidence] = _count(conn.execute(sql, (cutoff,)))
        sql = f"DELETE FROM {facts} WHERE run_id IN ({old})"
        out[facts] = _count(conn.execute(sql, (cutoff,)))
        # the runs last: the statements above name them by what is still there
        out[runs] = _count(conn.execute(f"DELETE FROM {runs} WHERE id IN ({old})", (cutoff,)))


def _quiet(table: str, at: str) -> str:
    """Rows of ``table`` whose session has had nothing since before the cutoff."""
    return (
        f"session_id IN (SELECT session_id FROM {table} GROUP BY session_id HAVING MAX({at}) < ?)"
    )


def _transcript(conn: Any, cutoff: float, out: dict[str, int]) -> None:
    if not _has(conn, "transcript_messages"):
        return
    cited = [
        f"SELECT message_id FROM {t} WHERE message_id IS NOT NULL"
        for t in ("memory_evidence", "shadow_proposal_evidence", "steward_fact_evidence")
        if _has(conn, t)
    ]
    keep = f" AND id NOT IN ({' UNION '.join(cited)})" if cited else ""
    sql = f"DELETE FROM transcript_messages WHERE {_quiet('transcript_messages', 'created_at')}"
    out["transcript_messages"] = _count(conn.execute(sql + keep, (cutoff,)))


def _ledgers(conn: Any, cutoff: float, out: dict[str, int]) -> None:
    for table in ("memory_injections", "memory_injected"):
        if _has(conn, table):
            sql = f"DELETE FROM {table} WHERE {_quiet(table, 'created_at')}"
            out[table] = _count(conn.execute(sql, (cutoff,)))
    if _has(conn, "compress_outputs"):
        sql = "DELETE FROM compress_outputs WHERE created_at < ?"
        out["compress_outputs"] = _count(conn.execute(sql, (cutoff,)))


def _accounting(conn: Any, cutoff: float, out: dict[str, int]) -> None:
    if _has(conn, "exchanges"):
        out["exchanges"] = _count(conn.execute("DELETE FROM exchanges WHERE ts < ?", (cutoff,)))
    if _has(conn, "spend_hours"):
        hour = int(cutoff // HOUR)
        out["spend_hours"] = _count(conn.execute("DELETE FROM spend_hours WHERE hour < ?", (hour,)))


#: In order: runs before the transcript (a pruned run's evidence no longer keeps a message).
STEPS: tuple[Callable[[Any, float, dict[str, int]], None], ...] = (
    _accounting,
    _runs,
    _transcript,
    _ledgers,
)


def prune_database(conn: Any, cutoff: float) -> dict[str, int]:
    """Delete what is older than ``cutoff`` (epoch seconds, a whole hour: ``cutoff_for``)
    from one database, in the caller's transaction; rows deleted, by table."""
    out: dict[str, int] = {}
    for step in STEPS:
        step(conn, cutoff, out)
    return out

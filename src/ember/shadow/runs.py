"""Writing and reading shadow runs and their proposals (SQL only; the writer runs the jobs).

A run's outcome — its row, its proposals and their evidence — is written by ONE job, which
first checks whether the run was cancelled: a user message that interrupts a run leaves a
``cancelled`` row and not one proposal, and a ``kill -9`` at any point leaves no half-written
batch (the job's transaction is all or nothing). A run still ``running`` after a restart was
interrupted: it is closed as ``failed`` when the shadow starts.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ember.shadow.models import CallUsage, ParsedFact, RunPath, RunStatus
from ember.store.driver import Connection

_RUNS = "shadow_memory_runs"
_PROPOSALS = "shadow_fact_proposals"
_EVIDENCE = "shadow_proposal_evidence"


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(6)}"


@dataclass(frozen=True)
class Tables:
    """Shadow and steward keep the same shapes in tables of their own."""

    runs: str = _RUNS
    proposals: str = _PROPOSALS
    evidence: str = _EVIDENCE
    evidence_owner: str = "proposal_id"
    has_path: bool = True


SHADOW_TABLES = Tables()
STEWARD_TABLES = Tables(
    "steward_runs", "steward_facts", "steward_fact_evidence", "fact_id", has_path=False
)


def start_run(
    conn: Connection,
    run_id: str,
    session_id: str,
    generation: int,
    path: RunPath,
    trigger: str,
    model: str | None,
    from_seq: int,
    through_seq: int,
    tables: Tables = SHADOW_TABLES,
) -> None:
    cols = "id, session_id, generation, model, status, from_seq, through_seq, started_at"
    values: list[Any] = [run_id, session_id, generation, model, "running", from_seq, through_seq]
    if tables.has_path:
        cols += ", path, trigger"
        values += [path, trigger]
    marks = ",".join("?" * (len(values) + 1))
    conn.execute(
        f"INSERT INTO {tables.runs} ({cols}) VALUES ({marks})",
        (*values[:7], time.time(), *values[7:]),
    )


@dataclass
class Finish:
    """How a run ended, and what it cost."""

    status: RunStatus
    calls: Sequence[CallUsage] = ()
    reason: str | None = None
    error: str | None = None
    latency_ms: float | None = None
    price_snapshot: str | None = None
    model: str | None = None


def finish_run(
    conn: Connection,
    run_id: str,
    finish: Finish,
    facts: Sequence[tuple[ParsedFact, str | None]] = (),
    session_id: str = "",
    abort: threading.Event | None = None,
    tables: Tables = SHADOW_TABLES,
) -> list[str]:
    """Close the run and store its proposals (``(fact, validation_error)`` pairs), in the
    caller's job. Returns the ids of the valid proposals; none when the run was aborted."""
    if abort is not None and abort.is_set():
        finish = Finish(
            "cancelled",
            finish.calls,
            "interrupted by a user message",
            "interrupted-by-user",
            finish.latency_ms,
            finish.price_snapshot,
            finish.model,
        )
        facts = ()
    usd = _usd(finish.calls)
    conn.execute(
        f"UPDATE {tables.runs} SET status=?, reason=?, error=?, calls=?, input_tokens=?, "
        "cache_read_tokens=?, cache_write_tokens=?, output_tokens=?, latency_ms=?, "
        "estimated_usd=?, price_snapshot=?, finished_at=?, model=COALESCE(?, model) WHERE id=?",
        (
            finish.status,
            finish.reason,
            finish.error,
            len(finish.calls),
            sum(c.input_tokens for c in finish.calls),
            sum(c.cache_read_tokens for c in finish.calls),
            sum(c.cache_write_tokens for c in finish.calls),
            sum(c.output_tokens for c in finish.calls),
            finish.latency_ms,
            usd,
            finish.price_snapshot,
            time.time(),
            finish.model,
            run_id,
        ),
    )
    return [
        pid
        for fact, error in facts
        if (pid := _insert_proposal(conn, run_id, session_id, fact, error, tables)) and not error
    ]


def _usd(calls: Sequence[CallUsage]) -> float | None:
    """The run's cost: None as soon as one call has no price (never a smaller number)."""
    if any(c.usd is None for c in calls):
        return None
    return sum(c.usd or 0.0 for c in calls)


def _insert_proposal(
    conn: Connection,
    run_id: str,
    session_id: str,
    fact: ParsedFact,
    error: str | None,
    tables: Tables,
) -> str:
    pid = new_id("p" if tables is SHADOW_TABLES else "f")
    evidence = fact.raw.get("evidence") if isinstance(fact.raw, dict) else None
    conn.execute(
        f"INSERT INTO {tables.proposals} (id, run_id, session_id, content, category, evidence, "
        "validation_error, created_at) VALUES (?,?,?,?,?,?,?,?)",
        (
            pid,
            run_id,
            session_id,
            fact.content,
            fact.fact.category if fact.fact is not None else None,
            json.dumps(evidence, ensure_ascii=False),
            error,
            time.time(),
        ),
    )
    if fact.fact is not None and error is None:
        conn.executemany(
            f"INSERT INTO {tables.evidence} ({tables.evidence_owner}, kind, message_id, "
            "session_id) VALUES (?,?,?,?)",
            [(pid, e.kind, e.messageId, e.sessionId) for e in fact.fact.evidence],
        )
    return pid


def skip_run(
    conn: Connection,
    run_id: str,
    session_id: str,
    generation: int,
    path: RunPath,
    trigger: str,
    reason: str,
    tables: Tables = SHADOW_TABLES,
    model: str | None = None,
) -> None:
    """A run that did not call anything, with why (the spend cap, no credentials...)."""
    start_run(conn, run_id, session_id, generation, path, trigger, model, 0, 0, tables)
    finish_run(conn, run_id, Finish("skipped", reason=reason), tables=tables)


def close_interrupted(conn: Connection, tables: Tables = SHADOW_TABLES) -> int:
    """Runs left ``running`` by a process that died: failed, with why."""
    cur = conn.execute(
        f"UPDATE {tables.runs} SET status='failed', error='interrupted: the process stopped', "
        "finished_at=? WHERE status='running'",
        (time.time(),),
    )
    return int(cur.rowcount or 0)


def link_memory(
    conn: Connection, proposal_id: str, memory_id: str, tables: Tables = SHADOW_TABLES
) -> None:
    conn.execute(f"UPDATE {tables.proposals} SET memory_id=? WHERE id=?", (memory_id, proposal_id))


def stored_memory_ids(
    conn: Connection, session_id: str, tables: Tables = SHADOW_TABLES
) -> list[str]:
    """The memories the session's earlier runs stored (their proposals' ``memory_id``),
    first stored first."""
    rows = conn.execute(
        f"SELECT memory_id FROM {tables.proposals} WHERE session_id=? AND memory_id IS NOT NULL "
        "ORDER BY created_at",
        (session_id,),
    )
    return list(dict.fromkeys(str(r[0]) for r in rows))

"""What ``ember shadow`` reads from a project database (SQL only, read transactions).

Rows come out as the JSON objects ``CONTRACT.md`` fixes (``ember shadow runs --json``:
``id, session_id, path, model, status, input_tokens, cache_read_tokens, cache_write_tokens,
output_tokens, latency_ms, estimated_usd, error``; ``ember shadow proposals --json``:
``id, run_id, content, evidence, validation_error``), with a few more fields that help read
them. Steward runs and facts have the same shapes; a steward run's ``path`` is ``steward``.

Rows that share a time are ordered as they were inserted on SQLite (``rowid``). PostgreSQL
has no rowid: there they are ordered by id. Each row's time is taken when its own statement
runs, so two rows of one run or one write share a time only within the clock's resolution
(a fraction of a microsecond, far less than a statement takes).
"""

from __future__ import annotations

import json
from typing import Any

from ember.shadow.compare import SIDES, FactRow, Inputs, RunRow, Side, Target, pointers_of
from ember.shadow.runs import SHADOW_TABLES, STEWARD_TABLES, Tables
from ember.store.driver import Connection
from ember.store.sql import dialect

_RUN_COLUMNS = (
    "id, session_id, generation, {path} AS path, {trigger} AS trigger, model, status, reason, "
    "error, from_seq, through_seq, calls, input_tokens, cache_read_tokens, cache_write_tokens, "
    "output_tokens, latency_ms, estimated_usd, price_snapshot, started_at, finished_at"
)


def _inserted(conn: Connection, alias: str = "") -> str:
    """The tie-breaker after a time: insertion order where the backend keeps one."""
    return f"{alias}rowid" if dialect(conn) == "sqlite" else f"{alias}id"


def _tables(side: Side) -> Tables:
    return SHADOW_TABLES if side == "shadow" else STEWARD_TABLES


def _run_select(side: Side) -> str:
    t = _tables(side)
    cols = _RUN_COLUMNS.format(
        path="path" if t.has_path else "'steward'",
        trigger="trigger" if t.has_path else "NULL",
    )
    counts = (
        f"(SELECT COUNT(*) FROM {t.proposals} p WHERE p.run_id = r.id) AS proposals, "
        f"(SELECT COUNT(*) FROM {t.proposals} p WHERE p.run_id = r.id "
        "AND p.validation_error IS NULL) AS valid_proposals"
    )
    return f"SELECT {cols}, {counts} FROM {t.runs} r"


def runs(conn: Connection, side: Side = "shadow", limit: int | None = None) -> list[dict[str, Any]]:
    """Runs, newest first."""
    sql = _run_select(side) + f" ORDER BY started_at DESC, {_inserted(conn, 'r.')} DESC"
    args: tuple[Any, ...] = ()
    if limit is not None:
        sql += " LIMIT ?"
        args = (limit,)
    return [dict(r) for r in conn.execute(sql, args)]


def proposals(
    conn: Connection,
    side: Side = "shadow",
    run_id: str | None = None,
    invalid_only: bool = False,
) -> list[dict[str, Any]]:
    """Proposals (the steward's: facts), oldest first; ``evidence`` as proposed."""
    t = _tables(side)
    where: list[str] = []
    args: list[Any] = []
    if run_id is not None:
        where.append("run_id = ?")
        args.append(run_id)
    if invalid_only:
        where.append("validation_error IS NOT NULL")
    sql = (
        "SELECT id, run_id, session_id, content, category, evidence, validation_error, "
        f"memory_id, created_at FROM {t.proposals}"
        + (" WHERE " + " AND ".join(where) if where else "")
        + f" ORDER BY created_at, {_inserted(conn)}"
    )
    out = []
    for r in conn.execute(sql, args):
        row = dict(r)
        row["evidence"] = _json_or_text(row["evidence"])
        out.append(row)
    return out


def _json_or_text(raw: str | None) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw


def compare_inputs(conn: Connection) -> Inputs:
    """Every run and proposal of both sides, and the transcript messages they point at."""
    inputs = Inputs()
    for s in SIDES:
        for r in runs(conn, s):
            inputs.runs.append(
                RunRow(
                    r["id"],
                    s,
                    r["session_id"],
                    r["path"],
                    r["model"],
                    r["status"],
                    r["calls"],
                    r["input_tokens"],
                    r["cache_read_tokens"],
                    r["cache_write_tokens"],
                    r["output_tokens"],
                    r["latency_ms"],
                    r["estimated_usd"],
                    r["price_snapshot"],
                )
            )
        t = _tables(s)
        for p in conn.execute(
            "SELECT id, run_id, session_id, content, evidence, validation_error "
            f"FROM {t.proposals} ORDER BY created_at, {_inserted(conn)}"
        ):
            inputs.facts.append(
                FactRow(
                    p["id"],
                    s,
                    p["run_id"],
                    p["session_id"],
                    p["content"],
                    pointers_of(p["evidence"]),
                    p["validation_error"],
                )
            )
    wanted = sorted({ptr.message_id for f in inputs.facts for ptr in f.pointers if ptr.message_id})
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for m in conn.execute(
            f"SELECT id, session_id, kind FROM transcript_messages WHERE id IN ({marks})", chunk
        ):
            inputs.targets[m["id"]] = Target(m["session_id"], m["kind"])
    return inputs

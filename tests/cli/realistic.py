"""A home with the data a user has after a few days (not a test module): long session ids,
a model without a price, token counts in the millions, a skipped run with its reason, a failed
one, an invalid proposal, CJK text, a memory with message and session evidence, and TOIN
patterns in the stats file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ember.learn.toin.keys import PatternKey
from ember.learn.toin.patterns import Pattern
from ember.learn.toin.store import merge_patterns
from ember.memory.core import HierarchicalMemory
from ember.memory.extraction import SavePayload
from ember.memory.models import Evidence
from ember.project import ProjectRef
from ember.protocols.base import Usage
from ember.shadow import runs
from ember.shadow.models import CallUsage, RunPath, parse_facts
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.registry import stats_db_path
from ember.store.schema import PROJECT, STATS
from ember.store.transcript_rows import Row, insert_rows
from tests.memory.conftest import HashEmbedder

PROJECT_ID = "acme-platform-monorepo"
REF = ProjectRef(PROJECT_ID, "header:x-ember-project-id")
SESSIONS = ("5ead0000-0000-4000-8000-000000000001", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
LONG = (
    "Releases deploy to eu-west-1 through the deploy workflow on a version tag, never by hand; "
    "the staging database is PostgreSQL 16 on port 5433 and its migrations run before the app."
)
SKIP_WHY = (
    "the shadow budget is spent: $0.0667 of $0.0667 over the last 7 days (15% of the clients' "
    "spend plus the allowance); the messages stay unread for a later run"
)


def _exchange(
    session: str, model: str | None, n: int, cost: float | None, origin: str
) -> ExchangeRecord:
    usage = Usage(n, n * 40, n * 4, 0, n // 2)
    return ExchangeRecord(time.time(), session, PROJECT_ID, "anthropic", model, 200, "ok", True,
                          usage, cost, "builtin-2026-11", 1200.0, 300.0, origin=origin)  # fmt: skip


def _accounting(conn: Connection) -> None:
    for record in (
        _exchange(SESSIONS[0], "claude-sonnet-4-5", 312_345, 12.3456, "client"),
        _exchange(SESSIONS[1], "acme-internal-llm-70b-instruct", 9_876, None, "client"),
        _exchange(SESSIONS[1], "claude-sonnet-4-5", 1_234, 0.0123, "shadow"),
        _exchange(SESSIONS[1], "claude-3-5-haiku-20241022", 2_345, None, "steward"),
    ):
        record.insert(conn)


def _run(
    conn: Connection, side: runs.Tables, path: RunPath, finish: runs.Finish, facts: list[Any]
) -> str:
    run_id = runs.new_id("r")
    runs.start_run(conn, run_id, SESSIONS[0], 1, path, "generation-ended", finish.model, 1, 3,
                   side)  # fmt: skip
    parsed = parse_facts({"facts": [f for f, _ in facts]})
    pairs = list(zip(parsed, [e for _, e in facts], strict=True))
    runs.finish_run(conn, run_id, finish, pairs, SESSIONS[0], tables=side)
    return run_id


def _shadow(conn: Connection) -> None:
    insert_rows(conn, [
        Row("m1", SESSIONS[0], 1, 0, 0, "user", "user", "d1", LONG),
        Row("m2", SESSIONS[0], 1, 1, 0, "tool", "tool_result", "d2", "部署使用独立工作区"),
    ])  # fmt: skip
    model = "claude-3-5-haiku-20241022"
    calls = [CallUsage(model, 1_234_567, 12_345_678, 98_765, 4_321, None)]
    done = runs.Finish("completed", calls, latency_ms=123_456.0, model=model)
    pointers = [{"kind": "user-stated", "messageId": "m1"},
                {"kind": "observed-outcome", "sessionId": SESSIONS[0]}]  # fmt: skip
    verified = [{"kind": "tool-verified", "messageId": "m2"}]
    _run(conn, runs.SHADOW_TABLES, "hot", done, [
        ({"content": LONG, "evidence": pointers}, None),
        ({"content": "部署有独立工作区", "evidence": verified}, None),
        ({"content": "Invented", "evidence": [{"kind": "user-stated", "messageId": "m-nowhere"}]},
         "evidence m-nowhere is not a message of this project's transcript (the model named a "
         "message id that was never listed in the question)"),
    ])  # fmt: skip
    _run(conn, runs.SHADOW_TABLES, "cold", runs.Finish("skipped", reason=SKIP_WHY), [])
    failed = runs.Finish("failed", error="upstream 529 overloaded_error: Overloaded " * 3)
    _run(conn, runs.SHADOW_TABLES, "hot", failed, [])
    _run(conn, runs.STEWARD_TABLES, "cold", done, [({"content": LONG, "evidence": pointers}, None)])


def _memories(db: Database) -> str:
    store = HierarchicalMemory(db, HashEmbedder)
    try:
        for text in (LONG, "Lint with ruff; format with ruff format", "部署使用独立工作区 " * 6):
            store.add(text, importance=0.8)
        payload = SavePayload.parse({"facts": [{"content": "The API uses PostgreSQL 16 [db]"}]})
        evidence = [Evidence("user-stated", message_id="m1"),
                    Evidence("observed-outcome", session_id=SESSIONS[0])]  # fmt: skip
        store.save(payload, evidence=evidence)
        return store.list()[0].id
    finally:
        store.close()


def _toin(conn: Connection) -> None:
    patterns = []
    for family, kind, n in (("claude-sonnet", "text:grep", 60), ("gpt-5-codex-mini", "json", 9)):
        p = Pattern(PatternKey("oauth_subscription", family, "9f8e7d6c5b4a3210" * 2), kind)
        for _ in range(n):
            p.observe(1200, False, (), 1.0)
        patterns.append(p)
    merge_patterns(conn, patterns)


def build(home: Path) -> dict[str, str]:
    """Fill ``home`` (project ``PROJECT_ID`` and the stats file); returns the ids tests need."""
    db = Database(REF.db_path(home), PROJECT, vec=True)  # as the CLI opens it
    try:
        db.write(_accounting)
        db.write(_shadow)
        memory_id = _memories(db)
    finally:
        db.close()
    stats = Database(stats_db_path(home), STATS)
    try:
        stats.write(_accounting)
        stats.write(_toin)
    finally:
        stats.close()
    return {"memory": memory_id}

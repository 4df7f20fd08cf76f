"""One developer's ember home for the merge tests: a project every developer shares, with a
row in every table a proxy fills (accounting, the transcript, shadow memory's cursors, runs
and proposals, memories with evidence, entities and vectors, the injection and compression
ledgers, traffic sightings) and stats with learned state. Two homes made with different
``who`` hold different sessions, memories and messages of the same project, numbered from 1
each, as two developers' machines do."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.facts import Evidence
from ember.memory import HierarchicalMemory
from ember.memory.extraction import SavePayload
from ember.project import project_dir_name
from ember.shadow import cursors
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.schema import PROJECT, STATS
from ember.store.transcript_rows import insert_rows, rows_for
from tests.memory.conftest import Clock, HashEmbedder

PROJECT_ID = "/src/team-api"
#: the entity both developers name, each in their own case: one entity in a merged store
SHARED_ENTITY = {"a": "PostgreSQL", "b": "postgresql"}
#: the traffic sighting both developers made (learned counts differ: the target's stays)
SHARED_SIGHTING = "k-deploy-command"
FACTS = {
    "a": [
        "The team api deploys with make ship from the release branch",
        "PostgreSQL migrations live in db/migrations",
        "The staging cluster is called blue-heron",
    ],
    "b": [
        "Widgets render with the canvas backend",
        "The widget cache of postgresql rows expires after ten minutes",
        "Release notes are written in docs/changes.md",
        "Never log the customer's email address",
    ],
}


def project_path(home: Path) -> Path:
    return home / "projects" / project_dir_name(PROJECT_ID, is_path=True) / "ember.db"


@dataclass(frozen=True)
class Said:
    role: str
    kind: str
    text: str
    position: int
    part: int = 0


def _sessions(who: str) -> list[str]:
    return [f"{who}-session-1", f"{who}-session-2"]


def _transcript(conn: Connection, who: str, session: str, start: int, n: int) -> None:
    items = [
        Said(
            "user" if i % 2 == 0 else "assistant",
            "user" if i % 2 == 0 else "assistant",
            f"{who} {session} message {i}",
            i,
        )
        for i in range(start, start + n)
    ]
    insert_rows(conn, rows_for(session, 0, items, start))


def _ids(conn: Connection, session: str) -> list[str]:
    rows = conn.execute(
        "SELECT id FROM transcript_messages WHERE session_id=? ORDER BY seq", (session,)
    ).fetchall()
    return [str(r[0]) for r in rows]


def _max_seq(conn: Connection, session: str) -> int:
    row = conn.execute(
        "SELECT MAX(seq) FROM transcript_messages WHERE session_id=?", (session,)
    ).fetchone()
    return int(row[0])


def _shadow(conn: Connection, who: str) -> None:
    """Activation after session 1's history, a start and cursor per session, a completed run
    over each session's messages with one proposal and its evidence, a steward run."""
    one, two = _sessions(who)
    _transcript(conn, who, one, 0, 4)
    cursors.activate(conn)
    _transcript(conn, who, two, 0, 3)
    _transcript(conn, who, one, 4, 4)  # interleaved: session 1 resumes after session 2
    _transcript(conn, who, two, 3, 3)
    for session in (one, two):
        cursors.mark_start(conn, session, 0, 4)
        cursors.ensure_cursor(conn, session, 0)
        ids = _ids(conn, session)
        first = conn.execute("SELECT seq FROM transcript_messages WHERE id=?", (ids[4],))
        run = f"run-{session}"
        conn.execute(
            "INSERT INTO shadow_memory_runs (id, session_id, generation, path, trigger, model, "
            "status, from_seq, through_seq, calls, started_at, finished_at) "
            "VALUES (?,?,0,'hot','turn','m','completed',?,?,1,1.79e9,1.79e9)",
            (run, session, int(first.fetchone()[0]), _max_seq(conn, session)),
        )
        conn.execute(
            "INSERT INTO shadow_fact_proposals (id, run_id, session_id, content, category, "
            "evidence, created_at) VALUES (?,?,?,?,'fact','[]',1.79e9)",
            (f"p-{session}", run, session, f"{who} proposes a fact"),
        )
        conn.execute(
            "INSERT INTO shadow_proposal_evidence (proposal_id, kind, message_id) "
            "VALUES (?, 'user-stated', ?)",
            (f"p-{session}", ids[4]),
        )
        conn.execute(
            "INSERT INTO steward_runs (id, session_id, generation, status, from_seq, "
            "through_seq, started_at) VALUES (?,?,0,'completed',?,?,1.79e9)",
            (f"st-{session}", session, _max_seq(conn, session) - 1, _max_seq(conn, session)),
        )
        conn.execute(
            "INSERT INTO steward_digested VALUES (?, 0, ?)", (session, _max_seq(conn, session))
        )


def _ledgers(conn: Connection, who: str) -> None:
    for n, session in enumerate(_sessions(who)):
        conn.execute(
            "INSERT INTO memory_injections VALUES (?, 2, ?, 'block', '[]', 1.79e9, 0)",
            (session, f"{who}-digest-{n}"),
        )
        conn.execute(
            "INSERT INTO memory_injected VALUES (?, ?, 2, ?, 1.79e9, 1)",
            (f"{who}-memory", session, f"{who}-digest-{n}"),
        )
        conn.execute(
            "INSERT INTO compress_outputs (ref, session_id, digest, message, how, original, "
            "shortened, original_tokens, shortened_tokens, created_at) "
            "VALUES (?,?,?,3,'lines','long output','short',100,10,1.79e9)",
            (f"r-{who}-{n}", session, f"{who}-out-{n}"),
        )
        conn.execute("INSERT INTO compress_sessions VALUES (?, 1, 1.79e9)", (session,))
    conn.execute(
        "INSERT INTO traffic_sightings (key, category, content, count, first_seen, last_seen) "
        "VALUES (?, 'command', 'make ship', ?, 1.79e9, 1.79e9)",
        (SHARED_SIGHTING, 2 if who == "a" else 3),
    )
    conn.execute(
        "INSERT INTO traffic_seen VALUES (?, ?, 1.79e9)", (SHARED_SIGHTING, f"{who}-pointer")
    )


def _exchanges(conn: Connection, who: str, n: int, project: str | None) -> None:
    for i in range(n):
        ExchangeRecord(
            ts=1_790_000_000.0 + i * 61.5 + (0.25 if who == "b" else 0.0),
            session_id=_sessions(who)[i % 2], project=project, protocol="anthropic",
            model="claude-x", status=200, outcome="ok", stream=bool(i % 2), usage=None,
            cost_usd=0.001 * (i + 1), price_snapshot="p1", latency_ms=100.0 + i, ttfb_ms=None,
        ).insert(conn)  # fmt: skip


def _memories(path: Path, who: str) -> None:
    store = HierarchicalMemory(path, HashEmbedder(), clock=Clock())
    try:
        session = _sessions(who)[0]
        message = store.database.read(lambda c: _ids(c, session))[1]
        payload = SavePayload.parse(
            {
                "facts": [{"content": f} for f in FACTS[who]],
                "entities": [{"name": SHARED_ENTITY[who], "type": "tool"}, {"name": who + "-svc"}],
                "relationships": [
                    {"source": who + "-svc", "relation": "uses", "target": SHARED_ENTITY[who]}
                ],
            }
        )
        evidence = [Evidence("user-stated", message_id=message)]
        store.save(payload, evidence=evidence, session_id=session)
        old = store.add(f"{who}: the old deploy used a shell script")
        store.supersede(old.id, f"{who}: the deploy uses make ship now")
    finally:
        store.close()


def make_home(home: Path, who: str) -> Path:
    """A home of developer ``who`` ("a" or "b"); returns the shared project's file."""
    path = project_path(home)
    db = Database(path, PROJECT, log_failures=False)
    try:
        db.write(lambda c: _shadow(c, who), exclusive=True)
        db.write(lambda c: _ledgers(c, who))
        db.write(lambda c: _exchanges(c, who, 12 if who == "a" else 9, PROJECT_ID))
    finally:
        db.close()
    _memories(path, who)
    stats = Database(home / "stats.db", STATS, log_failures=False)
    try:
        stats.write(lambda c: _exchanges(c, who, 5, None))
        doc = json.dumps({"who": who})
        stats.write(
            lambda c: c.execute("INSERT INTO shaping_state VALUES ('verbosity', ?, 1.79e9)", (doc,))
        )
    finally:
        stats.close()
    return path


def counts(conn: Any, tables: list[str]) -> dict[str, int]:
    return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tables}

"""Retention (``ember store prune``, ``store_retention_days``) on an ember home and on a real
PostgreSQL: old requests, transcripts, ledgers and runs go; memories, their evidence and the
messages it points at stay; the hourly sums still add up to the rows; a session still going
and a session's reading position are untouched; a dry run deletes nothing and says what a
real run deletes; the proxy's stage prunes with the owners it already has."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ember.cli import cli
from ember.facts import Evidence, NewMemory
from ember.memory import HierarchicalMemory
from ember.project import project_dir_name
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database
from ember.store.pruning import prune_store
from ember.store.schema import PROJECT
from ember.store.transcript_rows import message_id
from tests.memory.conftest import Clock, HashEmbedder, pg_database

NOW = 1_800_000_000.0
DAY = 86_400.0
OLD, RECENT = NOW - 120 * DAY, NOW - 2 * DAY
CITED = message_id("old-session", 0, 1, 0, "d1")


def _exchange(ts: float, session: str, origin: str = "client") -> ExchangeRecord:
    return ExchangeRecord(
        ts=ts, session_id=session, project="/src/kept", protocol="anthropic", model="m",
        status=200, outcome="ok", stream=False, usage=None, cost_usd=0.25, price_snapshot="p",
        latency_ms=10.0, ttfb_ms=None, origin=origin,
    )  # fmt: skip


def _message(conn: Any, session: str, position: int, at: float) -> None:
    conn.execute(
        "INSERT INTO transcript_messages (id, session_id, generation, position, part, role, "
        "kind, digest, content, created_at) VALUES (?,?,0,?,0,'user','user',?,?,?)",
        (message_id(session, 0, position, 0, f"d{position}"), session, position,
         f"d{position}", f"{session} says {position}", at),
    )  # fmt: skip


def _run(conn: Any, run: str, session: str, status: str, through: int, at: float) -> None:
    conn.execute(
        "INSERT INTO shadow_memory_runs (id, session_id, generation, path, trigger, status, "
        "from_seq, through_seq, started_at) VALUES (?,?,0,'cold','quiet',?,1,?,?)",
        (run, session, status, through, at),
    )
    conn.execute(
        "INSERT INTO shadow_fact_proposals (id, run_id, session_id, content, evidence, "
        "created_at) VALUES (?,?,?,'a fact','[]',?)",
        (f"p-{run}", run, session, at),
    )
    conn.execute(
        "INSERT INTO shadow_proposal_evidence (proposal_id, kind, session_id) "
        "VALUES (?, 'observed-outcome', ?)",
        (f"p-{run}", session),
    )


def _fill(conn: Any) -> None:
    """An old quiet session, a long session still going, and recent traffic."""
    for i in range(6):
        _exchange(OLD + i * 60, "old-session").insert(conn)
        _exchange(RECENT + i * 60, "live-session").insert(conn)
    _exchange(OLD + 999, "old-session", origin="shadow").insert(conn)
    for position in range(4):
        _message(conn, "old-session", position, OLD + position)
        _message(conn, "live-session", position, OLD + position)  # started long ago...
    _message(conn, "live-session", 4, RECENT)  # ...and still going
    for session, at in (("old-session", OLD), ("live-session", OLD), ("live-session", RECENT)):
        conn.execute(
            "INSERT INTO memory_injections VALUES (?, ?, ?, 'b', '[]', ?, 0)",
            (session, int(at), f"x{at}", at),
        )
        conn.execute(
            "INSERT INTO memory_injected VALUES ('mem', ?, ?, ?, ?, NULL)",
            (session, int(at), f"x{at}", at),
        )
    for ref, at in (("r-old", OLD), ("r-new", RECENT)):
        conn.execute(
            "INSERT INTO compress_outputs (ref, session_id, digest, message, how, original, "
            "shortened, original_tokens, shortened_tokens, created_at) "
            "VALUES (?, 's', ?, 1, 'lines', 'o', 's', 9, 1, ?)",
            (ref, ref, at),
        )
    _run(conn, "run-1", "old-session", "completed", 2, OLD)
    _run(conn, "run-2", "old-session", "completed", 3, OLD + 10)  # where its reading stopped
    _run(conn, "run-3", "old-session", "failed", 3, OLD + 20)
    _run(conn, "run-4", "live-session", "completed", 4, RECENT)


def _memory(db: Database) -> None:
    store = HierarchicalMemory(db, HashEmbedder(), clock=Clock(OLD))
    try:
        evidence = (Evidence("user-stated", message_id=CITED),)
        store.add_many(
            [NewMemory("The old session decided on blue-green deploys", evidence=evidence)]
        )
    finally:
        store.close()


def _state(conn: Any) -> dict[str, Any]:
    def ids(sql: str) -> list[str]:
        return sorted(str(r[0]) for r in conn.execute(sql).fetchall())

    client = conn.execute(
        "SELECT count(*), SUM(cost_usd) FROM exchanges WHERE origin IN ('client','shadow')"
    ).fetchone()
    hours = conn.execute("SELECT SUM(calls), SUM(usd) FROM spend_hours").fetchone()
    return {
        "exchanges": (int(client[0]), float(client[1] or 0)),
        "spend_hours": (int(hours[0] or 0), float(hours[1] or 0)),
        "messages": ids("SELECT session_id || ':' || position FROM transcript_messages"),
        "memories": ids("SELECT content FROM memories"),
        "evidence": ids(
            "SELECT e.message_id FROM memory_evidence e JOIN transcript_messages t "
            "ON t.id = e.message_id"
        ),
        "injections": ids("SELECT session_id FROM memory_injections"),
        "injected": ids("SELECT session_id FROM memory_injected"),
        "outputs": ids("SELECT ref FROM compress_outputs"),
        "runs": ids("SELECT id FROM shadow_memory_runs"),
        "proposals": ids("SELECT run_id FROM shadow_fact_proposals"),
        "proposal_evidence": ids("SELECT proposal_id FROM shadow_proposal_evidence"),
    }


Open = Callable[[], Database]


@pytest.fixture(params=["sqlite", "postgres"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Path, str | None, Open]]:
    """(home, store_url, how to open the project's database), filled."""
    home = tmp_path / "home"
    path = home / "projects" / project_dir_name("/src/kept", is_path=True) / "ember.db"
    url: str | None = None
    if request.param == "postgres":
        pytest.importorskip("psycopg", reason="the postgres extra is not installed")
        url = request.getfixturevalue("pg_url")

    def open_db() -> Database:
        if url is None:
            return Database(path, PROJECT, log_failures=False)
        return pg_database(url, home, path)

    db = open_db()
    try:
        db.write(_fill, exclusive=True)
        _memory(db)
    finally:
        db.close()
    yield home, url, open_db


def _read(open_db: Open) -> dict[str, Any]:
    db = open_db()
    try:
        return db.read(_state)  # type: ignore[no-any-return]
    finally:
        db.close()


def test_old_rows_go_and_what_memories_stand_on_stays(
    store: tuple[Path, str | None, Open],
) -> None:
    home, url, open_db = store
    before = _read(open_db)
    assert before["exchanges"] == before["spend_hours"] == (13, 3.25)

    rehearsed = prune_store(home, url, 90, dry_run=True, now=NOW)
    assert rehearsed.ok and rehearsed.total > 0
    assert _read(open_db) == before  # a dry run deletes nothing

    done = prune_store(home, url, 90, now=NOW)
    assert done.ok, done.lines()
    assert [d.rows for d in done.databases] == [d.rows for d in rehearsed.databases]
    after = _read(open_db)
    # the hourly sums are exactly the sums of the rows left
    assert after["exchanges"] == after["spend_hours"] == (6, 1.5)
    # a quiet old session's transcript goes, but for the message a memory's evidence cites;
    # a session still going keeps all of it, old messages too
    cited = "old-session:1"
    assert after["messages"] == sorted([cited] + [f"live-session:{i}" for i in range(5)])
    assert after["memories"] == before["memories"] and after["evidence"] == [CITED]
    assert after["injections"] == after["injected"] == ["live-session", "live-session"]
    assert after["outputs"] == ["r-new"]
    # each session's last completed run stays (where its reading stopped); the rest go with
    # their proposals and evidence
    assert after["runs"] == ["run-2", "run-4"]
    assert after["proposals"] == ["run-2", "run-4"]
    assert after["proposal_evidence"] == ["p-run-2", "p-run-4"]
    again = prune_store(home, url, 90, now=NOW)
    assert again.ok and again.total == 0


def test_the_command_prunes_says_what_and_refuses_a_cutoff_inside_the_month(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    path = home / "projects" / project_dir_name("/src/kept", is_path=True) / "ember.db"
    db = Database(path, PROJECT, log_failures=False)
    try:
        db.write(_fill, exclusive=True)
    finally:
        db.close()
    env = {"EMBER_HOME": str(home), "EMBER_STORE_URL": ""}
    runner = CliRunner()
    refused = runner.invoke(cli, ["store", "prune", "--older-than", "7d"], env=env)
    assert refused.exit_code == 2 and "at least 32 days" in refused.output
    shown = runner.invoke(cli, ["store", "prune", "--older-than", "4w", "--dry-run"], env=env)
    assert shown.exit_code == 2 and "at least 32 days" in shown.output
    dry = runner.invoke(cli, ["store", "prune", "--older-than", "60d", "--dry-run"], env=env)
    assert dry.exit_code == 0, dry.output
    assert "would delete" in dry.output and "nothing was deleted" in dry.output
    assert "memories and their evidence are kept" in dry.output
    real = runner.invoke(cli, ["store", "prune", "--older-than", "60d", "--json"], env=env)
    assert real.exit_code == 0, real.output
    report = json.loads(real.output)
    assert report["ok"] and report["rows"] > 0 and not report["dry_run"]
    [database] = report["databases"]
    assert database["rows"]["exchanges"] > 0 and database["error"] is None


def test_the_proxys_stage_prunes_through_the_owners_it_has(
    store: tuple[Path, str | None, Open],
) -> None:
    from ember.store.registry import Storage
    from ember.store.retention_stage import RetentionStage

    home, url, open_db = store
    storage = Storage(home, store_url=url)
    try:
        stage = RetentionStage(90, storage)
        pruned = asyncio.run(stage.run_once(now=NOW))
    finally:
        storage.close()
    assert pruned["exchanges"] == 7 and pruned["transcript_messages"] == 3
    assert _read(open_db)["exchanges"] == (6, 1.5)


def test_the_setting_builds_the_stage_and_says_so(tmp_path: Path) -> None:
    from ember.config import load_settings
    from ember.features import Composition
    from ember.store.registry import Storage
    from ember.store.retention import FEATURE

    unset = load_settings(env={"EMBER_HOME": str(tmp_path)})
    assert FEATURE.stages(Composition(unset, Storage(tmp_path))) == ()
    assert FEATURE.banner(unset) is None
    settings = load_settings(env={"EMBER_HOME": str(tmp_path), "EMBER_STORE_RETENTION_DAYS": "120"})
    [stage] = FEATURE.stages(Composition(settings, Storage(tmp_path)))
    assert stage.name == "retention"
    banner = FEATURE.banner(settings)
    assert banner is not None and "older than 120 days" in banner

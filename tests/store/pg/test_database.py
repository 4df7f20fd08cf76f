"""``PgDatabase``: the owner of a project's schema keeps the SQLite owner's promises — batched
writes where one failing job loses no other, waited writes, a version that moves with every
commit of any process, one schema per project (issue #24). Against a real PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.errors import StorageError
from ember.store.accounting import ExchangeRecord, sessions_of
from ember.store.migrations import Migration, Schema
from ember.store.pg.database import PgDatabase
from ember.store.pg.migrate import migrate
from ember.store.pg.names import schema_name
from ember.store.registry import Storage
from ember.store.schema import PG_PROJECT, PROJECT

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")


def _project(home: Path, name: str) -> Path:
    return home / "projects" / f"{name}-{'0123456789abcdef'}" / "ember.db"


def _row(session: str, n: int = 0, cost: float | None = 0.5) -> ExchangeRecord:
    return ExchangeRecord(
        ts=1_700_000_000.0 + n,
        session_id=session,
        project="p",
        protocol="anthropic",
        model="claude-sonnet-4-5",
        status=200,
        outcome="ok",
        stream=False,
        usage=None,
        cost_usd=cost,
        price_snapshot="{}",
        latency_ms=10.0,
        ttfb_ms=None,
    )


@pytest.fixture
def storage(tmp_path: Path, pg_url: str) -> Iterator[Storage]:
    s = Storage(tmp_path, store_url=pg_url)
    try:
        yield s
    finally:
        s.close()


def _count(db: Any, sql: str = "SELECT COUNT(*) FROM exchanges") -> int:
    return int(db.read(lambda c: c.execute(sql).fetchone()[0]))


def test_submitted_jobs_commit_together_and_a_failing_one_loses_no_other(
    storage: Storage, tmp_path: Path
) -> None:
    db = storage.database(_project(tmp_path, "acme"))
    db.write(lambda c: None)  # opened and migrated: the jobs below queue up behind nothing

    def broken(conn: Any) -> None:
        conn.execute("INSERT INTO no_such_table VALUES (1)")

    futures = [db.submit(_row(f"s{i}").insert, label="accounting") for i in range(200)]
    bad = db.submit(broken, label="accounting")
    futures += [db.submit(_row(f"t{i}").insert, label="accounting") for i in range(200)]
    assert db.flush(30)
    assert all(f.exception() is None for f in futures)
    assert isinstance(bad.exception(), psycopg.errors.UndefinedTable)
    assert _count(db) == 400
    summary = db.stats.summary()
    assert summary["jobs_per_batch"] > 2  # batched: far fewer transactions than jobs
    assert db.health.ok


def test_write_and_awrite_wait_for_their_own_job(storage: Storage, tmp_path: Path) -> None:
    import asyncio

    db = storage.database(_project(tmp_path, "acme"))

    def insert(conn: Any) -> int:
        row = conn.execute(
            "INSERT INTO exchanges (ts, session_id, protocol, status, outcome, stream, "
            "usage_known, price_snapshot, latency_ms) VALUES (1, 's', 'openai', 200, 'ok', 0, "
            "0, '{}', 1) RETURNING id"
        ).fetchone()
        return int(row[0])

    first = db.write(insert)
    second = asyncio.run(db.awrite(insert))
    assert second == first + 1 and _count(db) == 2


def test_data_version_moves_with_every_commit_of_another_process_and_not_with_reads(
    tmp_path: Path, pg_url: str
) -> None:
    """Two storages (two proxies) on one project: memory caches key on this number."""
    path = _project(tmp_path, "acme")
    one, other = Storage(tmp_path, store_url=pg_url), Storage(tmp_path, store_url=pg_url)
    try:
        mine, theirs = one.database(path), other.database(path)
        before = mine.data_version()
        assert _count(mine) == 0 and mine.data_version() == before  # a read is no commit
        theirs.write(_row("s").insert)
        after = mine.data_version()
        assert after != before
        theirs.write(lambda c: None)  # a write job that changed nothing is still a commit
        assert mine.data_version() != after
    finally:
        one.close()
        other.close()


def test_each_project_reads_and_writes_only_its_own_schema(
    storage: Storage, tmp_path: Path
) -> None:
    acme = storage.database(_project(tmp_path, "acme"))
    beta = storage.database(_project(tmp_path, "beta"))
    for i in range(3):
        acme.submit(_row(f"acme-{i}", i).insert)
    beta.submit(_row("beta-0").insert)
    assert storage.flush(30)
    assert [r["session_id"] for r in acme.read(sessions_of)] == ["acme-2", "acme-1", "acme-0"]
    assert [r["session_id"] for r in beta.read(sessions_of)] == ["beta-0"]
    assert isinstance(acme, PgDatabase) and isinstance(beta, PgDatabase)
    assert acme.schema_name != beta.schema_name
    # The same unqualified statement, in one project's transaction, names its own table only.
    assert acme.read(lambda c: c.execute("SHOW search_path").fetchone()[0]) == acme.schema_name
    # ...and a connection given back to the pool keeps no project (SET LOCAL).
    with acme._pool().connection() as conn:
        assert conn.execute("SHOW search_path").fetchone()[0] == '"$user", public'


def test_the_stats_file_and_projects_map_to_distinct_short_schemas(tmp_path: Path) -> None:
    home = tmp_path
    long = "a-very-long-project-name-that-goes-on-and-on-and-on-and-on-x"
    names = {
        schema_name(home, home / "stats.db"),
        schema_name(home, home / "global" / "ember.db"),
        schema_name(home, _project(home, "Acme.API")),
        schema_name(home, home / "projects" / f"{long}-0123456789abcdef" / "ember.db"),
        schema_name(home, home / "projects" / f"{long}-fedcba9876543210" / "ember.db"),
        schema_name(home, tmp_path / "elsewhere" / "x.db"),
    }
    assert len(names) == 6
    assert "ember_home" in names and "ember_p_acme_api_0123456789abcdef" in names
    assert all(len(n) <= 63 and n.replace("_", "").isalnum() and n == n.lower() for n in names)


def test_a_schema_that_needs_unported_migrations_is_refused_by_name(
    tmp_path: Path, pg_url: str
) -> None:
    # every builtin feature is ported now: a plugin's schema with two unported migrations
    schema = Schema(
        "plugin",
        (
            Migration("plugin_0001", "CREATE TABLE a (x INTEGER)"),
            Migration(
                "plugin_0002", "CREATE TABLE b (x INTEGER)", postgres="CREATE TABLE b (x INT)"
            ),
            Migration("plugin_0003", "CREATE TABLE c (x INTEGER)"),
        ),
    )
    assert schema.unported() == ["plugin_0001", "plugin_0003"]
    with pytest.raises(StorageError) as raised:
        PgDatabase(_project(tmp_path, "acme"), schema, url=pg_url, schema_name="ember_p_x")
    assert "plugin_0001" in str(raised.value) and "plugin_0003" in str(raised.value)
    assert "plugin_0002" not in str(raised.value)
    assert PG_PROJECT.unported() == PROJECT.unported() == []  # every builtin is ported


def test_migrations_race_to_one_run_when_processes_open_a_project_at_once(pg_url: str) -> None:
    """Six connections (six proxies starting) migrate one new schema at the same moment:
    each migration is applied by exactly one of them, and none fails."""
    start = threading.Barrier(6)
    applied: list[list[str]] = []
    failed: list[BaseException] = []

    def run() -> None:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            start.wait(10)
            try:
                applied.append(migrate(conn, "ember_p_race", PG_PROJECT))
            except BaseException as exc:
                failed.append(exc)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failed
    assert sorted(n for names in applied for n in names) == sorted(
        m.name for m in PG_PROJECT.migrations
    )
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT name FROM ember_p_race._migrations ORDER BY seq").fetchall()
    assert [r[0] for r in rows] == [m.name for m in PG_PROJECT.migrations]


def test_a_migration_that_fails_leaves_the_schema_at_the_one_before(pg_url: str) -> None:
    schema = Schema(
        "t",
        (
            Migration("0001_a", "", postgres="CREATE TABLE a (x INTEGER)"),
            Migration("0002_b", "", postgres="CREATE TABLE b (x INTEGER); SELECT no_such_fn()"),
        ),
    )
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedFunction):
            migrate(conn, "ember_f_t", schema)
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'ember_f_t' "
            "ORDER BY 1"
        ).fetchall()
        names = conn.execute("SELECT name FROM ember_f_t._migrations").fetchall()
    assert [t[0] for t in tables] == ["_ember_delivered", "_ember_version", "_migrations", "a"]
    assert [n[0] for n in names] == ["0001_a"]


def test_spend_hours_count_the_same_hours_as_sqlite(tmp_path: Path, pg_url: str) -> None:
    """PostgreSQL's CAST rounds where SQLite's truncates: a row late in an hour must count in
    that hour on both (the trigger's floor), and every derived number must match."""
    rows = [_row("s", n) for n in (0, 1799, 1801, 3599, 7300)]  # around half-hours
    rows.append(_row("s", 5, cost=None))
    reads = {
        "sessions": "SELECT * FROM session_totals ORDER BY session_id",
        "hours": "SELECT * FROM spend_hours ORDER BY hour, extraction, protocol",
        "origins": "SELECT * FROM spend_by_origin ORDER BY session_id, origin",
    }
    got = {}
    for backend, url in (("sqlite", None), ("postgres", pg_url)):
        storage = Storage(tmp_path / backend, store_url=url, vec=False)
        try:
            db = storage.database(_project(tmp_path / backend, "acme"))
            for r in rows:
                db.submit(r.insert)
            assert storage.flush(30)
            got[backend] = {
                k: db.read(lambda c, sql=sql: [tuple(r) for r in c.execute(sql)])
                for k, sql in reads.items()
            }
        finally:
            storage.close()
    assert got["postgres"] == got["sqlite"]
    assert len(got["sqlite"]["hours"]) == 3


def test_reads_of_a_project_never_seen_create_nothing(tmp_path: Path, pg_url: str) -> None:
    db = PgDatabase(
        _project(tmp_path, "ghost"), PG_PROJECT, url=pg_url, schema_name="ember_p_ghost"
    )
    try:
        assert db.exists() is False
        assert db.exists() is False
    finally:
        db.close()
    with psycopg.connect(pg_url) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'ember_p_ghost'")
        assert found.fetchone() is None


def test_writes_of_many_projects_share_a_bounded_pool(storage: Storage, tmp_path: Path) -> None:
    from ember.store.pg.pool import MAX_CONNECTIONS

    dbs = [storage.database(_project(tmp_path, f"p{i}")) for i in range(20)]
    deadline = time.monotonic() + 60
    for db in dbs:
        for i in range(20):
            db.submit(_row(f"s{i}").insert)
    assert storage.flush(max(1.0, deadline - time.monotonic()))
    assert all(_count(db) == 20 for db in dbs)
    pool = dbs[0]._pool()  # type: ignore[attr-defined]
    assert all(db._pool() is pool for db in dbs)  # type: ignore[attr-defined]
    assert pool.get_stats()["pool_size"] <= MAX_CONNECTIONS


def test_every_connection_bounds_its_statements(storage: Storage, tmp_path: Path) -> None:
    """A statement that runs away is stopped by the server (57014: that job fails alone)."""
    db = storage.database(_project(tmp_path, "acme"))
    with db._pool().connection() as conn:  # type: ignore[attr-defined]
        assert conn.execute("SHOW statement_timeout").fetchone()[0] == "1min"
        assert conn.execute("SHOW application_name").fetchone()[0] == "ember"

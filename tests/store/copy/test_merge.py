"""``ember store copy`` merging two developers' homes of one project into one store (a new
SQLite home, and a real PostgreSQL with pgvector): both homes' requests, memories, messages
and ledgers end up in it, every reference points at the right row under its new number,
shadow memory's cursors still split each session where they did, stats add up, a second
copy of a home changes nothing, and a dry run says what a copy will do and writes nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from ember.cli import cli
from ember.compose import spec
from ember.memory import HierarchicalMemory
from ember.store.copy import CopyReport, copy_store, parse
from ember.store.database import Database
from ember.store.pg.connection import dialect
from ember.store.schema import PROJECT, STATS
from tests.memory.conftest import Clock, HashEmbedder, pg_database
from tests.store.copy.homes import FACTS, SHARED_SIGHTING, make_home, project_path

TABLES = [
    "exchanges", "transcript_messages", "memories", "memory_vectors", "memory_evidence",
    "memory_entities", "memory_entity_links", "memory_relationships", "memory_injections",
    "memory_injected", "compress_outputs", "compress_sessions", "shadow_cursors",
    "shadow_starts", "shadow_memory_runs", "shadow_fact_proposals", "shadow_proposal_evidence",
    "steward_runs", "steward_digested", "traffic_seen", "traffic_sightings", "shadow_activation",
]  # fmt: skip
#: rows two homes share in the merged store: one entity (same name, other case), the
#: sighting both made, the project's one shadow activation
SHARED = {"memory_entities": 1, "traffic_sightings": 1, "shadow_activation": 1}
#: (table, column, edge): positions in the transcript, per session
MARKS = [
    ("shadow_cursors", "baseline_seq", "through"),
    ("shadow_starts", "through_seq", "through"),
    ("steward_digested", "through_seq", "through"),
    ("shadow_memory_runs", "through_seq", "through"),
    ("shadow_memory_runs", "from_seq", "from"),
    ("steward_runs", "from_seq", "from"),
]

Opener = Callable[[str], Database]


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Opener]]:
    """Where the homes are merged, and how to open one of its databases ("project" or
    "stats") as the proxy would."""
    if request.param == "sqlite":
        home = tmp_path / "merged"

        def sqlite(kind: str) -> Database:
            path = project_path(home) if kind == "project" else home / "stats.db"
            return Database(path, PROJECT if kind == "project" else STATS, log_failures=False)

        yield str(home), sqlite
        return
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    url = request.getfixturevalue("pg_url")
    pg_home = tmp_path / "pg-home"

    def postgres(kind: str) -> Database:
        from ember.store.pg.database import PgDatabase
        from ember.store.pg.names import HOME_SCHEMA
        from ember.store.schema import for_postgres

        if kind == "project":
            return pg_database(url, pg_home, project_path(pg_home))
        return PgDatabase(
            pg_home / "stats.db", for_postgres(STATS), url=url, schema_name=HOME_SCHEMA,
            log_failures=False,
        )  # fmt: skip

    yield url, postgres


def _read(db: Database, fn: Callable[[Any], Any]) -> Any:
    try:
        return db.read(fn)
    finally:
        db.close()


def _source(path: Path, fn: Callable[[Any], Any]) -> Any:
    schema = STATS if path.name == "stats.db" else PROJECT
    return _read(Database(path, schema, log_failures=False), fn)


def _counts(conn: Any) -> dict[str, int]:
    return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in TABLES}


def _copied(report: CopyReport, kind: str) -> dict[str, int]:
    unit = next(u for u in report.units if u.kind == kind)
    return {t.table: t.copied for t in unit.tables if t.skipped is None}


def _positions(conn: Any) -> dict[tuple[str, str, str, str], frozenset[str]]:
    """Each watermark as the set of its session's message ids it covers: the messages at or
    before it ("through") or at or after it ("from")."""
    out: dict[tuple[str, str, str, str], frozenset[str]] = {}
    for table, column, edge in MARKS:
        rows = conn.execute(f"SELECT session_id, {column} FROM {table}").fetchall()
        for session, at in rows:
            op = "<=" if edge == "through" else ">="
            ids = conn.execute(
                f"SELECT id FROM transcript_messages WHERE session_id = ? AND seq {op} ?",
                (session, at),
            ).fetchall()
            out[(table, column, str(session), edge)] = frozenset(str(r[0]) for r in ids)
    row = conn.execute("SELECT through_seq FROM shadow_activation").fetchone()
    ids = conn.execute("SELECT id FROM transcript_messages WHERE seq <= ?", (row[0],)).fetchall()
    out[("shadow_activation", "through_seq", "*", "through")] = frozenset(str(r[0]) for r in ids)
    return out


def _dangling(conn: Any) -> dict[str, int]:
    """Rows whose reference names no row: each must be 0."""
    checks = {
        "evidence -> memory": "SELECT count(*) FROM memory_evidence e "
        "WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.seq = e.memory_seq)",
        "evidence -> message": "SELECT count(*) FROM memory_evidence e WHERE e.message_id "
        "IS NOT NULL AND NOT EXISTS (SELECT 1 FROM transcript_messages t WHERE t.id = "
        "e.message_id)",
        "vector -> memory": "SELECT count(*) FROM memory_vectors v "
        "WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.seq = v.seq)",
        "link -> memory": "SELECT count(*) FROM memory_entity_links l "
        "WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.seq = l.memory_seq)",
        "link -> entity": "SELECT count(*) FROM memory_entity_links l "
        "WHERE NOT EXISTS (SELECT 1 FROM memory_entities e WHERE e.id = l.entity_id)",
        "relationship -> entity": "SELECT count(*) FROM memory_relationships r WHERE NOT "
        "EXISTS (SELECT 1 FROM memory_entities e WHERE e.id = r.source_id) OR NOT EXISTS "
        "(SELECT 1 FROM memory_entities e WHERE e.id = r.target_id)",
        "proposal evidence -> message": "SELECT count(*) FROM shadow_proposal_evidence e "
        "JOIN shadow_fact_proposals p ON p.id = e.proposal_id WHERE NOT EXISTS (SELECT 1 "
        "FROM transcript_messages t WHERE t.id = e.message_id AND t.session_id = p.session_id)",
    }
    out = {name: int(conn.execute(sql).fetchone()[0]) for name, sql in checks.items()}
    if dialect(conn) == "sqlite":
        out["foreign_key_check"] = len(conn.execute("PRAGMA foreign_key_check").fetchall())
        out["integrity_check"] = int(conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok")
    return out


def _vectors(conn: Any) -> dict[str, bytes]:
    rows = conn.execute(
        "SELECT m.id, v.vector FROM memories m JOIN memory_vectors v ON v.seq = m.seq"
    ).fetchall()
    return {str(r[0]): bytes(r[1]) for r in rows}


def _totals(conn: Any) -> tuple[int, float, int, float]:
    ex = conn.execute("SELECT count(*), SUM(cost_usd) FROM exchanges").fetchone()
    hours = conn.execute("SELECT SUM(calls), SUM(usd) FROM spend_hours").fetchone()
    return int(ex[0]), round(float(ex[1]), 9), int(hours[0]), round(float(hours[1]), 9)


def _search(db: Database, ask: str) -> list[str]:
    store = HierarchicalMemory(db, HashEmbedder(), clock=Clock())
    try:
        return [h.memory.content for h in store.search(ask, top_k=3, touch=False)]
    finally:
        store.close()
        db.close()


def test_two_homes_of_one_project_merge_into_one_store(
    target: tuple[str, Opener], tmp_path: Path
) -> None:
    dst, open_target = target
    homes = {who: tmp_path / who for who in ("a", "b")}
    sources = {who: make_home(home, who) for who, home in homes.items()}
    before = {who: _source(p, _counts) for who, p in sources.items()}
    marks = {who: _source(p, _positions) for who, p in sources.items()}
    vectors = {who: _source(p, _vectors) for who, p in sources.items()}

    first = copy_store(parse(str(homes["a"])), parse(dst), features=spec().features)
    assert first.ok, "\n".join(first.lines())
    rehearsed = copy_store(
        parse(str(homes["b"])), parse(dst), features=spec().features, dry_run=True
    )
    assert rehearsed.ok and rehearsed.dry_run, "\n".join(rehearsed.lines())
    assert _read(open_target("project"), _counts) == before["a"]  # the dry run wrote nothing
    second = copy_store(parse(str(homes["b"])), parse(dst), features=spec().features)
    assert second.ok, "\n".join(second.lines())
    assert _copied(rehearsed, "project") == _copied(second, "project")
    assert _copied(rehearsed, "stats") == _copied(second, "stats")

    merged = _read(open_target("project"), _counts)
    assert merged == {t: before["a"][t] + before["b"][t] - SHARED.get(t, 0) for t in TABLES}
    assert _read(open_target("project"), _dangling) == dict.fromkeys(
        _read(open_target("project"), _dangling), 0
    )
    # every memory keeps its own vector under its new number
    assert _read(open_target("project"), _vectors) == {**vectors["a"], **vectors["b"]}
    # shadow memory's cursors split each session where they did in its home; the
    # project's activation is the first home's and still covers exactly its history
    after = _read(open_target("project"), _positions)
    for who in ("a", "b"):
        for key, ids in marks[who].items():
            if key[0] != "shadow_activation":
                assert after[key] == ids, (who, key)
    activation = ("shadow_activation", "through_seq", "*", "through")
    assert after[activation] == marks["a"][activation]

    for who, facts in FACTS.items():
        for fact in (facts[0], facts[-1]):
            assert fact in _search(open_target("project"), fact), (who, fact)
    sighting = _read(
        open_target("project"),
        lambda c: c.execute(
            "SELECT count FROM traffic_sightings WHERE key = ?", (SHARED_SIGHTING,)
        ).fetchone()[0],
    )
    assert sighting == 2  # the first home's count: the target's row is kept

    stats = {who: _source(home / "stats.db", _totals) for who, home in homes.items()}
    project = {who: _source(p, _totals) for who, p in sources.items()}
    for kind, parts in (("stats", stats), ("project", project)):
        summed = tuple(round(a + b, 9) for a, b in zip(parts["a"], parts["b"], strict=True))
        assert _read(open_target(kind), _totals) == summed, kind

    for who in ("a", "b"):
        again = copy_store(parse(str(homes[who])), parse(dst), features=spec().features)
        assert again.ok and again.copied == 0, "\n".join(again.lines())
    assert _read(open_target("project"), _counts) == merged


def test_a_dry_run_into_a_new_store_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "a"
    make_home(home, "a")
    target = tmp_path / "new"
    args = ["store", "copy", "--from", str(home), "--to", str(target), "--dry-run"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert not target.exists()
    assert "would copy" in done.output and "nothing was written" in done.output
    assert re.search(r"exchanges +source +12 +would copy +12", done.output), done.output
    report = json.loads(CliRunner().invoke(cli, [*args, "--json"]).output)
    assert report["dry_run"] is True and report["copied"] > 0 and not target.exists()


def test_a_dry_run_into_postgres_leaves_no_schema(pg_url: str, tmp_path: Path) -> None:
    psycopg = pytest.importorskip("psycopg")
    home = tmp_path / "a"
    make_home(home, "a")
    report = copy_store(parse(str(home)), parse(pg_url), features=spec().features, dry_run=True)
    assert report.ok and report.copied > 0
    with psycopg.connect(pg_url) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'ember\\_%'"
        ).fetchone()
    assert left is not None and left[0] == 0


def test_a_row_whose_parent_is_not_copied_is_a_conflict_not_a_dangling_row(
    tmp_path: Path,
) -> None:
    """A memory that the target holds under its id with other content keeps the target's
    row; its vector is that memory's (already there or a conflict), never attached to a
    memory it does not belong to."""
    home = tmp_path / "a"
    path = make_home(home, "a")
    target = tmp_path / "t"
    assert copy_store(parse(str(home)), parse(str(target)), features=spec().features).ok
    db = Database(target / path.relative_to(home), PROJECT, log_failures=False)
    try:
        db.write(lambda c: c.execute("UPDATE memories SET content = 'changed' WHERE seq = 1"))
    finally:
        db.close()
    report = copy_store(parse(str(home)), parse(str(target)), features=spec().features)
    unit = next(u for u in report.units if u.kind == "project")
    memories = next(t for t in unit.tables if t.table == "memories")
    assert memories.conflicts == 1 and memories.conflict_keys == [[1]]
    assert not report.ok and report.copied == 0
    assert np.all([t.copied == 0 for t in unit.tables])


def test_a_child_of_a_row_that_could_not_go_in_is_left_out_as_a_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new parent row the target refuses (another unique key holds it) gets no number:
    its child is counted as a conflict and left out, never attached to another parent."""
    from ember.store.copy import policy

    monkeypatch.setitem(policy.RENUMBERED, "zz_parent", policy.Renumbered("id", ("name",)))
    monkeypatch.setitem(policy.RENUMBERED, "zz_child", policy.Renumbered("id"))
    tables = (
        "CREATE TABLE zz_parent (id INTEGER PRIMARY KEY, name TEXT UNIQUE, tag TEXT UNIQUE)",
        "CREATE TABLE zz_child (id INTEGER PRIMARY KEY, "
        "parent_id INTEGER NOT NULL REFERENCES zz_parent(id), note TEXT)",
    )
    rows = {
        "a": ["INSERT INTO zz_parent VALUES (1, 'mine', 'shared-tag')",
              "INSERT INTO zz_child VALUES (1, 1, 'belongs to mine')"],
        "t": ["INSERT INTO zz_parent VALUES (1, 'theirs', 'shared-tag')"],
    }  # fmt: skip
    for who in ("a", "t"):
        db = Database(project_path(tmp_path / who), PROJECT, log_failures=False)
        try:
            db.write(lambda c, w=who: [c.execute(sql) for sql in (*tables, *rows[w])])
        finally:
            db.close()
    report = copy_store(
        parse(str(tmp_path / "a")), parse(str(tmp_path / "t")), features=spec().features
    )
    unit = next(u for u in report.units if u.kind == "project")
    found = {t.table: t for t in unit.tables}
    assert found["zz_parent"].conflicts == 1 and found["zz_parent"].copied == 0
    assert found["zz_child"].conflicts == 1 and found["zz_child"].conflict_keys == [[1]]
    left = _read(
        Database(project_path(tmp_path / "t"), PROJECT, log_failures=False),
        lambda c: c.execute("SELECT count(*) FROM zz_child").fetchone()[0],
    )
    assert left == 0 and not report.ok

"""``ember store copy`` (issue #24 item 4) against a real PostgreSQL with pgvector (``pg_url``):
an ember home with two projects (accounting and memories with vectors) and stats goes to
PostgreSQL and back, with equal counts, the same search results, nothing new on a second run,
conflicts reported and never overwritten, and clear errors for ends that cannot be used."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ember.cli import cli
from ember.compose import spec
from ember.memory import HierarchicalMemory, NewMemory
from ember.project import project_dir_name
from ember.store.accounting import ExchangeRecord
from ember.store.copy import CopyError, copy_store, parse
from ember.store.database import Database
from ember.store.schema import PROJECT, STATS
from tests.memory.conftest import Clock, HashEmbedder, pg_database

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

FACTS = {
    "/src/acme-api": [
        "The acme API deploys with make ship from the release branch",
        "Postgres migrations live in db/migrations and run with alembic",
        "The staging cluster is called blue-heron",
        "Never log the customer's email address",
    ],
    "/src/Widget.App": [
        "Widgets are rendered with the canvas backend",
        "The widget cache expires after ten minutes",
        "Release notes are written in docs/changes.md",
    ],
}
ASKS = ["how do we deploy the api", "where are migrations", "widget cache expiry"]


def _exchange(i: int, project: str | None) -> ExchangeRecord:
    return ExchangeRecord(
        ts=1_790_000_000.0 + i * 61.5, session_id=f"s{i % 3}", project=project,
        protocol="anthropic", model="claude-x", status=200, outcome="ok", stream=bool(i % 2),
        usage=None, cost_usd=0.001 * i if i % 4 else None, price_snapshot="p1",
        latency_ms=120.25 + i, ttfb_ms=None if i % 5 == 0 else 40.5,
    )  # fmt: skip


def make_home(home: Path) -> dict[str, Path]:
    """Two projects with exchanges and memories (vectors from ``HashEmbedder``), and stats."""
    paths: dict[str, Path] = {}
    for identity, facts in FACTS.items():
        path = home / "projects" / project_dir_name(identity, is_path=True) / "ember.db"
        paths[identity] = path
        db = Database(path, PROJECT, log_failures=False)
        try:
            for i in range(25):
                db.write(_exchange(i, identity).insert)
        finally:
            db.close()
        store = HierarchicalMemory(path, HashEmbedder(), clock=Clock())
        try:
            store.add_many([NewMemory(f, category="fact", session_id="s1") for f in facts])
            old = store.add("The old deploy used a shell script")
            store.supersede(old.id, "The deploy uses make ship now")
        finally:
            store.close()
    shared = Database(home / "global" / "ember.db", PROJECT, log_failures=False)
    try:
        for i in range(3):
            shared.write(_exchange(i, "global").insert)
    finally:
        shared.close()
    stats = Database(home / "stats.db", STATS, log_failures=False)
    try:
        for i in range(7):
            stats.write(_exchange(i, None).insert)
    finally:
        stats.close()
    return paths


def _tables(report: dict[str, Any], database: str) -> dict[str, dict[str, Any]]:
    unit = next(u for u in report["databases"] if u["database"] == database)
    return {t["table"]: t for t in unit["tables"]}


def _run(src: str, dst: str) -> dict[str, Any]:
    return copy_store(parse(src), parse(dst), features=spec().features).to_json()


def _searches(store: HierarchicalMemory) -> list[list[tuple[str, float]]]:
    return [
        [(h.memory.content, round(h.score, 6)) for h in store.search(q, top_k=3, touch=False)]
        for q in ASKS
    ]


def test_a_home_goes_to_postgres_and_back_with_equal_counts(pg_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = make_home(home)
    first = _run(str(home), pg_url)
    assert first["ok"], first
    names = {u["database"] for u in first["databases"]}
    assert names == {p.parent.name for p in paths.values()} | {"stats", "global"}
    assert _tables(first, "global")["exchanges"]["copied"] == 3
    for path in paths.values():
        tables = _tables(first, path.parent.name)
        assert tables["exchanges"]["source"] == tables["exchanges"]["copied"] == 25
        assert tables["memories"]["source"] == tables["memories"]["target_after"] >= 5
        assert tables["memory_vectors"]["copied"] == tables["memories"]["source"] - 1
        assert tables["spend_hours"]["skipped"]  # kept by the trigger, not copied
    assert _tables(first, "stats")["exchanges"]["copied"] == 7

    # the same memories found the same way on PostgreSQL
    for identity, path in paths.items():
        sqlite = HierarchicalMemory(path, HashEmbedder(), clock=Clock())
        pg_db = pg_database(
            pg_url, tmp_path / "pg-home", tmp_path / "pg-home" / path.relative_to(home)
        )
        pg = HierarchicalMemory(pg_db, HashEmbedder(), clock=Clock())
        try:
            assert pg.count() == sqlite.count()
            assert _searches(pg) == _searches(sqlite), identity
        finally:
            pg.close()
            pg_db.close()
            sqlite.close()

    back = tmp_path / "back"
    returned = _run(pg_url, str(back))
    assert returned["ok"], returned
    for identity, path in paths.items():
        copied = back / path.relative_to(home)
        assert copied.is_file(), f"{identity}: the project's own folder, {path.parent.name}"
        original = HierarchicalMemory(path, HashEmbedder(), clock=Clock())
        again = HierarchicalMemory(copied, HashEmbedder(), clock=Clock())
        try:
            assert _searches(again) == _searches(original)
        finally:
            original.close()
            again.close()
        tables = _tables(returned, path.parent.name)
        assert tables["exchanges"]["target_after"] == 25
    assert (back / "stats.db").is_file()
    assert _tables(returned, "global")["exchanges"]["target_after"] == 3


def test_a_schema_the_proxy_made_goes_back_to_its_project_folder(
    pg_url: str, tmp_path: Path
) -> None:
    """A schema the copy did not name (a proxy on PostgreSQL made it) goes back to the
    folder its project's identity gives, which keeps capitals and dots the schema lost."""
    home = tmp_path / "home"
    paths = make_home(home)
    assert _run(str(home), pg_url)["ok"]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for (schema,) in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'ember_p_%'"
        ).fetchall():
            conn.execute(f'COMMENT ON SCHEMA "{schema}" IS NULL')
    back = tmp_path / "back"
    assert _run(pg_url, str(back))["ok"]
    assert {p.parent.name for p in (back / "projects").glob("*/ember.db")} == {
        p.parent.name for p in paths.values()
    }
    assert "Widget.App-" in " ".join(p.name for p in (back / "projects").iterdir())


def test_a_second_run_copies_nothing_and_says_so(pg_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_home(home)
    assert _run(str(home), pg_url)["copied"] > 0
    second = copy_store(parse(str(home)), parse(pg_url), features=spec().features)
    assert second.ok and second.copied == 0
    assert any("nothing new to copy" in line for line in second.lines())
    for unit in second.to_json()["databases"]:
        for t in unit["tables"]:
            if not t["skipped"]:
                assert t["already"] == t["source"] and t["target_after"] >= t["source"], t
        assert all(n == 0 for n in unit["rebuilt"].values()), unit["rebuilt"]


def test_a_conflicting_row_is_reported_and_kept(pg_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = make_home(home)
    target = tmp_path / "target"
    assert _run(str(home), str(target))["ok"]
    path = next(iter(paths.values()))
    db = Database(target / path.relative_to(home), PROJECT, log_failures=False)
    try:
        db.write(lambda c: c.execute("UPDATE exchanges SET model = 'changed' WHERE id = 3"))
    finally:
        db.close()
    report = _run(str(home), str(target))
    assert not report["ok"]
    exchanges = _tables(report, path.parent.name)["exchanges"]
    assert exchanges["conflicts"] == 1 and exchanges["conflict_keys"] == [[3]]
    assert exchanges["already"] == 24 and exchanges["copied"] == 0
    db = Database(target / path.relative_to(home), PROJECT, log_failures=False)
    try:
        row = db.read(lambda c: c.execute("SELECT model FROM exchanges WHERE id = 3").fetchone())
    finally:
        db.close()
    assert row[0] == "changed"


def test_the_source_is_never_written(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_home(home)
    before = {p: p.read_bytes() for p in home.rglob("*.db")}
    assert _run(str(home), str(tmp_path / "target"))["ok"]
    assert {p: p.read_bytes() for p in home.rglob("*.db")} == before


def test_bad_ends_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "not-a-home").mkdir()
    (tmp_path / "not-a-home" / "notes.txt").write_text("x")
    with pytest.raises(CopyError, match="is not an ember home"):
        _run(str(tmp_path / "not-a-home"), str(tmp_path / "t"))
    with pytest.raises(CopyError, match="is not an ember home"):
        _run(str(tmp_path / "nowhere"), str(tmp_path / "t"))
    make_home(tmp_path / "home")
    with pytest.raises(CopyError, match="the same store"):
        _run(str(tmp_path / "home"), str(tmp_path / "home"))
    with pytest.raises(CopyError, match="not an ember home"):
        _run(str(tmp_path / "home"), str(tmp_path / "not-a-home"))
    secret = "postgresql://ember:s3cr3t-pw@127.0.0.1:1/ember"
    shown = re.escape("cannot reach PostgreSQL at ember@127.0.0.1:1/ember")
    with pytest.raises(CopyError, match=shown) as e:
        _run(secret, str(tmp_path / "t"))
    assert "s3cr3t" not in str(e.value)
    (tmp_path / "empty-home" / "projects").mkdir(parents=True)
    with pytest.raises(CopyError, match="holds no ember database"):
        _run(str(tmp_path / "empty-home"), str(tmp_path / "t"))
    with pytest.raises(CopyError, match="neither an ember home"):
        parse("sqlite:///x.db")


def test_without_the_postgres_extra_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "psycopg" else real(name, *a)
    )
    with pytest.raises(CopyError, match=re.escape("pip install 'ember[postgres]'")):
        parse("postgresql://ember:pw@db:5432/ember")


def test_the_command_prints_json_and_fails_on_conflicts(pg_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = make_home(home)
    runner = CliRunner()
    done = runner.invoke(cli, ["store", "copy", "--from", str(home), "--to", pg_url, "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["ok"] is True
    text = runner.invoke(cli, ["store", "copy", "--from", str(home), "--to", pg_url])
    assert text.exit_code == 0 and "nothing new to copy" in text.output
    assert "password" not in text.output
    with psycopg.connect(pg_url, autocommit=True) as conn:
        schema = next(
            r[0] for r in conn.execute("SELECT nspname FROM pg_namespace").fetchall()
            if r[0].endswith(next(iter(paths.values())).parent.name.rsplit("-", 1)[1])
        )  # fmt: skip
        conn.execute(f'UPDATE "{schema}".memories SET importance = 0.01 WHERE seq = 2')
    clash = runner.invoke(cli, ["store", "copy", "--from", str(home), "--to", pg_url])
    assert clash.exit_code == 1, clash.output
    assert "CONFLICTS 1 (keys [[2]])" in clash.output
    helped = runner.invoke(cli, ["store", "copy", "--help"])
    assert "ember store copy --from ~/.ember --to postgresql://" in helped.output


def test_a_failure_mid_copy_rolls_back_that_database_and_a_rerun_finishes(
    pg_url: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    paths = make_home(home)
    victim = sorted(p.parent.name for p in paths.values())[-1]

    def progress(database: str, table: str, done: int, total: int) -> None:
        if database == victim and table == "memories":
            raise RuntimeError("the network went away")

    broken = copy_store(
        parse(str(home)), parse(pg_url), progress, features=spec().features
    ).to_json()
    assert not broken["ok"]
    failed = next(u for u in broken["databases"] if u["database"] == victim)
    assert "the network went away" in failed["error"]
    others = [u for u in broken["databases"] if u["database"] != victim]
    assert others and all(u["ok"] for u in others)
    with psycopg.connect(pg_url) as conn:
        schema = next(
            r[0] for r in conn.execute("SELECT nspname FROM pg_namespace").fetchall()
            if r[0].startswith("ember_p_") and r[0].endswith(victim.rsplit("-", 1)[1])
        )  # fmt: skip
        count = conn.execute(f'SELECT count(*) FROM "{schema}".exchanges').fetchone()
    assert count is not None and count[0] == 0  # exchanges came before: rolled back with it
    again = _run(str(home), pg_url)
    assert again["ok"]
    tables = _tables(again, victim)
    assert tables["exchanges"]["copied"] == 25 and tables["memories"]["copied"] > 0
    assert all(u["copied"] == 0 for u in again["databases"] if u["database"] != victim)


def test_after_a_copy_postgres_takes_new_memories_and_a_running_reader_sees_the_copy(
    pg_url: str, tmp_path: Path
) -> None:
    """Identity sequences are moved past the copied seqs (a new memory does not collide),
    and a process that searched the empty target before the copy finds the copied memories
    after it (its in-memory matrix follows the target's counters)."""
    home = tmp_path / "home"
    paths = make_home(home)
    path = paths["/src/acme-api"]
    pg_db = pg_database(pg_url, tmp_path / "h", tmp_path / "h" / path.relative_to(home))
    reader = HierarchicalMemory(pg_db, HashEmbedder(), clock=Clock())
    try:
        assert reader.search("deploy", top_k=3, touch=False) == []
        assert _run(str(home), pg_url)["ok"]
        hits = reader.search("how do we deploy the api", top_k=3, touch=False)
        assert hits and "make ship" in hits[0].memory.content
        new = reader.add("The api answers on port 8443", evidence=[])
        assert reader.get(new.id) is not None
        hits = reader.search("which port does the api answer on", top_k=1, touch=False)
        assert hits[0].memory.id == new.id
    finally:
        reader.close()
        pg_db.close()


def test_a_table_both_sides_have_is_copied_with_no_list_to_update(
    pg_url: str, tmp_path: Path
) -> None:
    """A feature that starts to run on PostgreSQL has its tables copied: the list is each
    side's catalog, and every table of the target is in the report, copied or said why not."""
    home = tmp_path / "home"
    paths = make_home(home)
    path = paths["/src/Widget.App"]
    db = Database(path, PROJECT, log_failures=False)
    try:
        db.write(lambda c: c.execute("CREATE TABLE zz_new (id INTEGER PRIMARY KEY, v TEXT)"))
        db.write(lambda c: c.executemany("INSERT INTO zz_new VALUES (?, ?)", [(1, "a"), (2, None)]))
    finally:
        db.close()
    pg_db = pg_database(pg_url, tmp_path / "h", tmp_path / "h" / path.relative_to(home))
    try:
        pg_db.write(lambda c: c.execute("CREATE TABLE zz_new (id BIGINT PRIMARY KEY, v TEXT)"))
        schema = pg_db.schema_name  # type: ignore[attr-defined]
    finally:
        pg_db.close()
    report = _run(str(home), pg_url)
    tables = _tables(report, path.parent.name)
    assert tables["zz_new"]["copied"] == 2 and tables["zz_new"]["verified"]
    with psycopg.connect(pg_url) as conn:
        listed = {
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
            ).fetchall()
        }
    assert listed - {"_migrations", "_ember_version"} <= tables.keys()


def test_an_unreachable_target_is_one_clear_error(tmp_path: Path) -> None:
    make_home(tmp_path / "home")
    shown = re.escape("cannot reach PostgreSQL at ember@127.0.0.1:1/x")
    with pytest.raises(CopyError, match=shown) as e:
        _run(str(tmp_path / "home"), "postgresql://ember:hunter2@127.0.0.1:1/x")
    assert "hunter2" not in str(e.value)


def test_a_server_with_no_ember_schema_is_a_clear_error(pg_url: str, tmp_path: Path) -> None:
    with pytest.raises(CopyError, match="holds no ember database"):
        _run(pg_url, str(tmp_path / "t"))
    assert not (tmp_path / "t").exists()


def test_a_bulk_load_builds_the_hnsw_graph_after_the_rows(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``BULK`` vectors the graph is dropped and built once after the load: it must be
    there at the end, over every vector, and searched."""
    from ember.memory import copying

    monkeypatch.setattr(copying, "BULK", 2)
    home = tmp_path / "home"
    paths = make_home(home)
    seen: list[tuple[int, bool]] = []  # (vectors in memory_vec, graph there) at each ensure
    real = copying.PgVectorIndex.ensure

    def ensure(self: Any, conn: Any) -> None:
        table = conn.execute("SELECT to_regclass('memory_vec') IS NOT NULL").fetchone()[0]
        rows = conn.execute("SELECT count(*) FROM memory_vec").fetchone()[0] if table else 0
        graph = conn.execute("SELECT to_regclass('memory_vec_hnsw') IS NOT NULL").fetchone()[0]
        seen.append((int(rows), bool(graph)))
        real(self, conn)

    monkeypatch.setattr(copying.PgVectorIndex, "ensure", ensure)
    assert _run(str(home), pg_url)["ok"]
    # per project: once before the load (nothing yet), once after it (every row, no graph)
    assert sorted(seen) == [(0, False), (0, False), (4, False), (5, False)]
    with psycopg.connect(pg_url) as conn:
        graphs = conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'memory_vec_hnsw'"
        ).fetchone()
    assert graphs is not None and graphs[0] == len(paths)


def test_a_reader_of_a_sqlite_target_sees_copied_seqs_below_its_own(tmp_path: Path) -> None:
    """A target whose memories sit at higher seqs than the copied ones (its own were added
    and deleted): a process that searched it before the copy ranks as a fresh one after it
    (its matrix reloads rather than append past its last seq and miss the copied rows)."""
    home = tmp_path / "home"
    paths = make_home(home)
    path = paths["/src/acme-api"]
    target = tmp_path / "target" / path.relative_to(home)
    reader = HierarchicalMemory(target, HashEmbedder(), clock=Clock())
    try:
        own = reader.add_many([NewMemory(f"filler note {i}") for i in range(20)])
        for m in own[:-1]:
            reader.delete(m.id)
        assert [h.memory.id for h in reader.search("filler note", top_k=3, touch=False)] == [
            own[-1].id
        ]
        report = _run(str(home), str(tmp_path / "target"))
        assert _tables(report, path.parent.name)["memories"]["conflicts"] == 0, report
        fresh = HierarchicalMemory(target, HashEmbedder(), clock=Clock())
        try:
            assert _searches(reader) == _searches(fresh)
        finally:
            fresh.close()
    finally:
        reader.close()


def test_a_target_without_sqlite_vec_is_searched_through_its_hnswlib_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ember.memory import copying

    monkeypatch.setattr(copying, "_has_vec", lambda conn: False)
    home = tmp_path / "home"
    paths = make_home(home)
    report = _run(str(home), str(tmp_path / "target"))
    path = paths["/src/acme-api"]
    assert _tables(report, path.parent.name)["memory_vectors"]["copied"] == 5
    original = HierarchicalMemory(path, HashEmbedder(), clock=Clock(), vector_index="hnsw")
    copied = HierarchicalMemory(
        tmp_path / "target" / path.relative_to(home), HashEmbedder(), clock=Clock(),
        vector_index="hnsw",
    )  # fmt: skip
    try:
        assert _searches(copied) == _searches(original)
    finally:
        original.close()
        copied.close()


def test_text_holding_a_nul_goes_to_postgres_as_ember_writes_it_there(
    pg_url: str, tmp_path: Path
) -> None:
    """A tool output that printed a NUL is stored as is on SQLite; PostgreSQL's text cannot
    hold one: the copy writes U+FFFD, as ember does on PostgreSQL, instead of failing the
    project, and a second run finds it already there."""
    home = tmp_path / "home"
    path = home / "projects" / project_dir_name("/src/nul", is_path=True) / "ember.db"
    store = HierarchicalMemory(path, HashEmbedder(), clock=Clock())
    try:
        store.add("The build log printed a NUL here:\x00 and went on")
    finally:
        store.close()
    first = _run(str(home), pg_url)
    assert first["ok"], first
    assert _tables(first, path.parent.name)["memories"]["copied"] == 1
    pg_home = tmp_path / "pg-home"
    pg_db = pg_database(pg_url, pg_home, pg_home / path.relative_to(home))
    pg = HierarchicalMemory(pg_db, HashEmbedder(), clock=Clock())
    try:
        [memory] = pg.list()
        assert memory.content == "The build log printed a NUL here:\ufffd and went on"
    finally:
        pg.close()
        pg_db.close()
    again = _run(str(home), pg_url)
    assert again["ok"] and _tables(again, path.parent.name)["memories"]["already"] == 1

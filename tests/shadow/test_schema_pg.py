"""Shadow memory's tables hold the same invariants on PostgreSQL as in SQLite (issue #24;
``shadow/schema_pg.py``), through the store's own query functions on a real server.

Every test runs on both backends (``backend``): the SQLite run is the reference the
PostgreSQL one must match — a resent transcript adds nothing, the activation watermark is
written once, evidence of a valid proposal cannot point into another session, an evidence
row names one of a message or a session, a deleted run takes its proposals with it, the
spend window counts each accounting row once, and the reads give the same rows.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.config import load_settings
from ember.shadow import backlog, cursors, reads, runs, spend, steward, views
from ember.shadow.models import CallUsage
from ember.shadow.schema import SHADOW
from ember.shadow.spend_share import WINDOW_SECONDS
from ember.store.database import Database
from ember.store.driver import Connection, errors
from ember.store.transcript_rows import (
    Lineage,
    Row,
    insert_rows,
    load_lineage,
    rows_for,
    save_lineage,
    unread,
)
from ember.views import Query
from tests.shadow.backends import BACKENDS, project_db

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

#: What each backend raises for a row its schema refuses.
REFUSED: tuple[type[BaseException], ...] = (errors.IntegrityError, psycopg.IntegrityError)

A_ROWS = [
    Row("mAAA", "A", 1, 0, 0, "user", "user", "d1", "deploy to eu-west-1"),
    Row("mAA2", "A", 1, 1, 0, "assistant", "assistant", "d3", "noted"),
]
B_ROWS = [Row("mBBB", "B", 1, 0, 0, "user", "user", "d2", "deploy to us-east-1")]


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A project database with two sessions' messages and one run of session A with a valid
    and an invalid proposal."""
    d = project_db(request.param, tmp_path, request)

    def setup(c: Connection) -> None:
        insert_rows(c, [*A_ROWS, *B_ROWS])
        runs.start_run(c, "r1", "A", 1, "hot", "turn-ended", "m", 1, 1)
        for pid, error, at in (("valid", None, 1.0), ("invalid", "service said no", 2.0)):
            c.execute(
                "INSERT INTO shadow_fact_proposals (id, run_id, session_id, content, evidence, "
                "validation_error, created_at) VALUES (?, 'r1', 'A', 'x', '[]', ?, ?)",
                (pid, error, at),
            )

    d.write(setup)
    yield d
    d.close()


def evidence(db: Database, proposal: str, message: str | None, session: str | None) -> None:
    db.write(
        lambda c: c.execute(
            "INSERT INTO shadow_proposal_evidence (proposal_id, kind, message_id, session_id) "
            "VALUES (?, 'observed-outcome', ?, ?)",
            (proposal, message, session),
        )
    )


def count(db: Database, table: str) -> int:
    return int(db.read(lambda c: c.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]))


# -- the transcript ----------------------------------------------------------------------------


def test_a_resent_transcript_adds_nothing_and_seqs_only_rise(db: Database) -> None:
    before = db.read(lambda c: unread(c, "A", 1, 0))
    db.write(lambda c: insert_rows(c, A_ROWS))  # the client sent its whole history again
    assert count(db, "transcript_messages") == 3
    later = Row("mAA3", "A", 1, 2, 0, "user", "user", "d4", "and tag the release")
    db.write(lambda c: insert_rows(c, [*A_ROWS, later]))
    after = db.read(lambda c: unread(c, "A", 1, 0))
    assert after[:2] == before and after[2].id == "mAA3"
    assert after[2].seq > max(m.seq for m in before)
    assert [m.id for m in db.read(lambda c: unread(c, "A", 1, before[-1].seq))] == ["mAA3"]


def test_a_nul_in_a_message_is_stored_as_a_replacement_character(db: Database) -> None:
    """PostgreSQL's text cannot hold a NUL: the message is stored on both, its id kept."""

    class Item:
        position, part, role, kind = 5, 0, "tool", "tool_result"
        text, tool_ids, tool = "binary\x00output", (), None

    [row] = rows_for("A", 1, [Item()], 0)  # type: ignore[list-item]
    db.write(lambda c: insert_rows(c, [row]))
    [stored] = db.read(lambda c: [m for m in unread(c, "A", 1, 0) if m.id == row.id])
    assert stored.content == "binary\ufffdoutput"


def test_the_lineage_is_replaced_not_added(db: Database) -> None:
    db.write(lambda c: save_lineage(c, "A", Lineage(1, "f", 2, "l", 2)))
    db.write(lambda c: save_lineage(c, "A", Lineage(2, "g", 3, "m", 4)))
    assert db.read(lambda c: load_lineage(c, "A")) == Lineage(2, "g", 3, "m", 4)
    assert count(db, "shadow_lineage") == 1


# -- activation and cursors --------------------------------------------------------------------


def test_the_activation_watermark_is_written_once(db: Database) -> None:
    first = db.write(cursors.activate)
    assert first == max(m.seq for m in db.read(lambda c: unread(c, "B", 1, 0)))
    db.write(lambda c: insert_rows(c, [Row("mAA9", "A", 1, 9, 0, "user", "user", "d9", "x")]))
    assert db.write(cursors.activate) == first  # activating again keeps it
    with pytest.raises(REFUSED, match="written once"):
        db.write(lambda c: c.execute("UPDATE shadow_activation SET through_seq = 0"))
    assert db.read(cursors.watermark) == first


def test_a_cursor_is_initialised_once_and_moves_with_completed_runs(db: Database) -> None:
    db.write(cursors.activate)  # every message so far is history
    first = db.write(lambda c: cursors.ensure_cursor(c, "A", 1))
    assert first.initialization == "enabled" and first.ready == first.baseline > 0
    again = db.write(lambda c: cursors.ensure_cursor(c, "A", 1))
    assert again == first and count(db, "shadow_cursors") == 1
    db.write(
        lambda c: runs.finish_run(c, "r1", runs.Finish("completed", [CallUsage("m", 1, 0, 0, 1)]))
    )
    db.write(lambda c: c.execute("UPDATE shadow_memory_runs SET through_seq = 99"))
    assert db.write(lambda c: cursors.ensure_cursor(c, "A", 1)).ready == 99


def test_the_stewards_mark_only_moves_forward(db: Database) -> None:
    for through in (5, 3, 8, 7):
        db.write(lambda c, t=through: steward.mark_digested(c, "A", 1, t))
    marks = db.read(lambda c: c.execute("SELECT through_seq FROM steward_digested").fetchall())
    assert [tuple(r) for r in marks] == [(8,)]


# -- evidence (the last layer: refused even when the service is wrong) -------------------------


def test_a_valid_proposal_citing_another_sessions_message_is_refused(db: Database) -> None:
    with pytest.raises(REFUSED, match="own session"):
        evidence(db, "valid", "mBBB", None)


def test_a_valid_proposal_citing_another_session_is_refused(db: Database) -> None:
    with pytest.raises(REFUSED, match="own session"):
        evidence(db, "valid", None, "B")


def test_a_valid_proposal_citing_a_message_ember_never_saw_is_refused(db: Database) -> None:
    with pytest.raises(REFUSED, match="own session"):
        evidence(db, "valid", "mZZZ", None)


def test_its_own_sessions_evidence_is_accepted(db: Database) -> None:
    evidence(db, "valid", "mAAA", None)
    evidence(db, "valid", None, "A")
    assert count(db, "shadow_proposal_evidence") == 2


def test_an_invalid_proposal_keeps_what_it_claimed(db: Database) -> None:
    evidence(db, "invalid", "mBBB", None)  # kept, as the rejected claim it is
    evidence(db, "invalid", None, "B")
    assert count(db, "shadow_proposal_evidence") == 2


@pytest.mark.parametrize(
    ("kind", "message", "session"),
    [("user-stated", "mAAA", "A"), ("user-stated", None, None), ("guessed", "mAAA", None)],
)
def test_an_evidence_row_names_one_known_kind_of_one_target(
    db: Database, kind: str, message: str | None, session: str | None
) -> None:
    def steward_fact(c: Connection) -> None:
        c.execute(
            "INSERT INTO steward_runs (id, session_id, generation, status, started_at) "
            "VALUES ('s1', 'A', 1, 'completed', 0)"
        )
        c.execute(
            "INSERT INTO steward_facts (id, run_id, session_id, content, evidence, created_at) "
            "VALUES ('f1', 's1', 'A', 'x', '[]', 0)"
        )

    def insert(table: str, owner: str, pid: str) -> Callable[[Connection], Any]:
        return lambda c: c.execute(
            f"INSERT INTO {table} ({owner}, kind, message_id, session_id) VALUES (?,?,?,?)",
            (pid, kind, message, session),
        )

    db.write(steward_fact)
    # the invalid proposal: the own-session trigger stays out of it, the CHECKs refuse alone
    for job in (
        insert("shadow_proposal_evidence", "proposal_id", "invalid"),
        insert("steward_fact_evidence", "fact_id", "f1"),
    ):
        with pytest.raises(REFUSED):
            db.write(job)


def test_a_deleted_run_takes_its_proposals_and_their_evidence(db: Database) -> None:
    evidence(db, "valid", "mAAA", None)
    db.write(lambda c: c.execute("DELETE FROM shadow_memory_runs WHERE id = 'r1'"))
    assert count(db, "shadow_fact_proposals") == count(db, "shadow_proposal_evidence") == 0


@pytest.mark.parametrize(
    ("column", "value"),
    [("status", "finished"), ("path", "warm"), ("session_id", None), ("started_at", None)],
)
def test_a_run_row_outside_the_schema_is_refused(db: Database, column: str, value: Any) -> None:
    with pytest.raises(REFUSED):
        db.write(lambda c: c.execute(f"UPDATE shadow_memory_runs SET {column} = ?", (value,)))


# -- what ember shadow, the dashboard and the budget read -------------------------------------


def _exchange(c: Connection, ts: float, origin: str, tokens: int, usd: float | None) -> None:
    c.execute(
        "INSERT INTO exchanges (ts, session_id, protocol, model, status, outcome, stream, "
        "input_tokens, usage_known, cost_usd, price_snapshot, latency_ms, origin) "
        "VALUES (?, 'A', 'anthropic', 'claude-sonnet-4-5', 200, 'ok', 0, ?, 1, ?, 'p', 1, ?)",
        (ts, tokens, usd, origin),
    )


def test_the_spend_window_counts_each_row_once(db: Database) -> None:
    """Rows late in their hour (PostgreSQL's CAST would round them into the next one): the
    first, partial hour from the rows, the later ones from spend_hours, none twice or lost."""
    hour = 490_000  # an hour in 2025
    now = (hour + 0.1) * 3600 + WINDOW_SECONDS  # the window starts 6 minutes into ``hour``

    def write(c: Connection) -> None:
        _exchange(c, (hour - 0.3) * 3600, "client", 100_000, 1.0)  # before the window
        _exchange(c, (hour + 0.7) * 3600, "client", 1_000, 0.25)  # the first, partial hour
        _exchange(c, (hour + 5.7) * 3600, "client", 2_000, 0.5)
        _exchange(c, (hour + 6.2) * 3600, "shadow", 300, None)  # an unpriced extraction

    db.write(write)
    clients, extraction = db.read(lambda c: spend.window(c, now))
    assert (clients.usd, clients.tokens) == (0.75, 3_000.0)
    assert (extraction.usd, extraction.tokens) == (None, 300.0)


def test_runs_and_proposals_read_back_in_order(db: Database) -> None:
    time.sleep(0.01)  # a later start than r1's
    db.write(lambda c: runs.start_run(c, "r2", "A", 1, "cold", "backlog", "m", 1, 2))
    facts = db.read(lambda c: reads.proposals(c))
    assert [f["id"] for f in facts] == ["valid", "invalid"]  # by time, oldest first
    assert facts[0]["evidence"] == [] and facts[1]["validation_error"] == "service said no"
    invalid = db.read(lambda c: reads.proposals(c, invalid_only=True))
    assert [f["id"] for f in invalid] == ["invalid"]
    found = db.read(lambda c: reads.runs(c, limit=5))
    assert [r["id"] for r in found] == ["r2", "r1"]  # newest first
    assert (found[1]["proposals"], found[1]["valid_proposals"], found[1]["path"]) == (2, 1, "hot")
    assert db.read(lambda c: reads.runs(c, "steward")) == []
    inputs = db.read(reads.compare_inputs)
    assert {r.id for r in inputs.runs} == {"r1", "r2"} and len(inputs.facts) == 2


# -- the two forms --------------------------------------------------------------------------


def _tables(sql: str) -> list[str]:
    return re.findall(r"CREATE TABLE (\w+)", sql)


def test_each_migration_has_a_postgres_form_creating_the_same_tables() -> None:
    for m in SHADOW:
        assert m.postgres is not None, m.name
        assert _tables(m.postgres) == _tables(m.sql) != [], m.name


def test_the_tables_on_the_server_are_the_files(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``ember store copy`` and every query name columns: the same names, in the same order,
    in every table on both backends."""
    names = [n for m in SHADOW for n in _tables(m.sql)]
    per_backend: list[dict[str, list[str]]] = []
    for backend in ("sqlite", "postgres"):
        d = project_db(backend, tmp_path / backend, request)
        try:
            per_backend.append({n: d.read(_column_names(n)) for n in names})
        finally:
            d.close()
    assert per_backend[0] == per_backend[1]


def _column_names(table: str) -> Callable[[Connection], list[str]]:
    def read(c: Connection) -> list[str]:
        cur = c.execute(f"SELECT * FROM {table} WHERE 1 = 0")
        return [d[0] for d in cur.description]

    return read


def test_the_dashboards_shadow_views_read_either_backend(db: Database) -> None:
    """``shadow/views.py`` over the project's database (the dashboard's context reduced to
    the settings and that database): runs, proposals with their status, budget, comparison."""

    class Context:
        settings = load_settings(env={})

        def project_db(self, name: str) -> Database:
            return db

    got = views.runs(Context(), Query("p", {"limit": "10"}))  # type: ignore[arg-type]
    assert [r["id"] for r in got["runs"]] == ["r1"]
    assert [(p["id"], p["status"]) for p in got["proposals"]] == [
        ("invalid", "invalid"),
        ("valid", "proposed"),
    ]
    assert got["budget"]["spent"] == 0
    report = views.comparison(Context(), Query("p", {}))  # type: ignore[arg-type]
    assert report["semantic"]["computed"] is False


def test_a_sessions_next_insert_waits_until_the_previous_one_committed(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two proxies writing one session: the second insert (a write batch of this owner)
    takes its seq only after the first (another process's transaction) committed, so a
    reader that saw the later seq has seen the earlier one too."""
    from ember.store.pg.connection import PgConnection

    db = project_db("postgres", tmp_path, request)
    db.write(lambda c: None)  # the schema, migrated
    url = request.getfixturevalue("pg_url")
    schema = db.schema_name  # type: ignore[attr-defined]
    msg = [Row(f"m{i}", "A", 1, i, 0, "user", "user", f"d{i}", "x") for i in range(2)]
    done = threading.Event()
    with psycopg.connect(url) as one:
        one.execute(f"SET search_path TO {schema}")
        insert_rows(PgConnection(one), msg[:1])  # not committed yet

        def insert() -> None:
            db.write(lambda c: insert_rows(c, msg[1:]))
            done.set()

        later = threading.Thread(target=insert)
        later.start()
        assert not done.wait(0.5)  # the second insert waits for the first
        one.commit()
        assert done.wait(10)
        later.join()
        got = [tuple(r) for r in one.execute("SELECT id, seq FROM transcript_messages")]
    db.close()
    seqs = dict(got)  # type: ignore[arg-type]
    assert seqs["m0"] < seqs["m1"]


def test_an_unread_backlog_is_found_once_quiet(db: Database) -> None:
    """``backlog.find``: sessions with messages past the watermark and past what was read,
    quiet for long enough, oldest first."""
    db.write(lambda c: c.execute("UPDATE transcript_messages SET created_at = 1000"))
    late = Row("mAA5", "A", 1, 5, 0, "user", "user", "d5", "later")
    db.write(lambda c: insert_rows(c, [late]))
    db.write(lambda c: c.execute("UPDATE transcript_messages SET created_at = 2000 WHERE seq > 3"))
    now = 2000 + backlog.QUIET_SECONDS
    found = db.read(lambda c: backlog.find(c, now))
    assert [(b.session_id, b.generation) for b in found] == [("B", 1), ("A", 1)]
    assert db.read(lambda c: backlog.find(c, now - 1)) == found[:1]  # A spoke too recently

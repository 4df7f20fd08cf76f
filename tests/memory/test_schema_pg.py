"""The memory tables' PostgreSQL forms (``memory/schema_pg.py``): the counters the in-memory
vector copy trusts move as SQLite's triggers move them, a row stored below a newer seq counts
as a change (a copy that only appends would miss it), and the evidence CHECKs and cascades
hold on the server as they do in the file."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ember.store.pg.migrate import migrate
from ember.store.schema import PG_PROJECT

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

SCHEMA = "ember_p_memory_schema"


@pytest.fixture
def conn(pg_url: str) -> Iterator[Any]:
    with psycopg.connect(pg_url, autocommit=True) as c:
        migrate(c, SCHEMA, PG_PROJECT)
        c.execute(f"SET search_path TO {SCHEMA}")
        yield c


def _memory(conn: Any, n: int) -> int:
    row = conn.execute(
        "INSERT INTO memories (id, content, content_hash, importance, created_at, valid_from) "
        "VALUES (%s, 'x', 'h', 0.5, 1.0, 1.0) RETURNING seq",
        (f"m{n}",),
    ).fetchone()
    return int(row[0])


def _counters(conn: Any) -> tuple[int, int]:
    found = dict(conn.execute("SELECT key, value FROM memory_meta").fetchall())
    return int(found["vector_added"]), int(found["vector_changes"])


def _put(conn: Any, seq: int) -> None:
    conn.execute(
        "INSERT INTO memory_vectors (seq, vector) VALUES (%s, '\\x00') "
        "ON CONFLICT (seq) DO UPDATE SET vector = EXCLUDED.vector",
        (seq,),
    )


def test_the_vector_counters_move_as_sqlites_and_a_late_low_seq_is_a_change(conn: Any) -> None:
    a, b, c = (_memory(conn, i) for i in range(3))
    assert a < b < c  # an identity: never reused, always rising
    assert _counters(conn) == (0, 0)
    _put(conn, a)
    _put(conn, b)
    assert _counters(conn) == (2, 0)  # new rows past every older one: appended
    _put(conn, b)
    assert _counters(conn) == (2, 1)  # rewritten: reload
    conn.execute("DELETE FROM memory_vectors WHERE seq = %s", (a,))
    assert _counters(conn) == (2, 2)
    _put(conn, a)  # below b, already stored: a copy appending past b would miss it
    assert _counters(conn) == (2, 3)
    conn.execute("DELETE FROM memories WHERE seq = %s", (b,))  # cascades to its vector
    assert _counters(conn) == (2, 4)
    _put(conn, c)
    assert _counters(conn) == (3, 4)


def test_evidence_checks_and_cascades_hold_on_the_server(conn: Any) -> None:
    seq = _memory(conn, 0)
    ins = (
        "INSERT INTO memory_evidence (memory_seq, kind, message_id, session_id) "
        "VALUES (%s, %s, %s, %s)"
    )
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(ins, (seq, "user-stated", "m1", "s1"))
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(ins, (seq, "guessed", "m1", None))
    conn.execute(ins, (seq, "user-stated", "m1", None))
    conn.execute("INSERT INTO memory_entities (name, created_at) VALUES ('Redis', 1.0)")
    with pytest.raises(psycopg.errors.UniqueViolation):  # SQLite's NOCASE UNIQUE
        conn.execute("INSERT INTO memory_entities (name, created_at) VALUES ('redis', 1.0)")
    conn.execute("DELETE FROM memories WHERE seq = %s", (seq,))
    assert conn.execute("SELECT count(*) FROM memory_evidence").fetchone()[0] == 0


def test_a_low_seq_committed_after_a_higher_one_is_counted_as_a_change(
    conn: Any, pg_url: str
) -> None:
    """Two processes: the one that drew the lower seq stores its vector last. Its trigger
    waits for the other's lock, then sees the higher row committed: a change, not an
    addition, so no in-memory copy skips it."""
    low, high = _memory(conn, 0), _memory(conn, 1)
    with psycopg.connect(pg_url) as first, psycopg.connect(pg_url) as second:
        for c in (first, second):
            c.execute(f"SET search_path TO {SCHEMA}")
            c.execute("SET statement_timeout = '20s'")
        _put(second, high)  # holds the counters' lock until it commits
        done = threading.Event()

        def late() -> None:
            _put(first, low)  # blocks on the lock
            done.set()

        thread = threading.Thread(target=late)
        thread.start()
        assert not done.wait(0.5)  # waiting for the higher seq's transaction
        second.commit()
        assert done.wait(20)
        thread.join(20)
        first.commit()
    assert _counters(conn) == (1, 1)

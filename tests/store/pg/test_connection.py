"""The store's SQL on PostgreSQL: ``?`` parameters, rows by index and by name, and user text
that stays data (issue #24). Against a real PostgreSQL (``pg_url``: a database of its own)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ember.store.pg.connection import PgConnection, PgRow, dialect, qmarks

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM t WHERE a=? AND b=?", "SELECT * FROM t WHERE a=%s AND b=%s"),
        ("SELECT '?' FROM t WHERE b LIKE '5%' AND c=?",
         "SELECT '?' FROM t WHERE b LIKE '5%%' AND c=%s"),
        ('SELECT "odd?name" FROM t WHERE x=?', 'SELECT "odd?name" FROM t WHERE x=%s'),
        ("SELECT 1 -- why? 100%\nFROM t WHERE x=?", "SELECT 1 -- why? 100%%\nFROM t WHERE x=%s"),
        ("SELECT 'it''s ?' WHERE x=?", "SELECT 'it''s ?' WHERE x=%s"),
    ],
)  # fmt: skip
def test_marks_become_psycopgs_only_outside_strings_names_and_comments(
    sql: str, expected: str
) -> None:
    assert qmarks(sql) == expected


@pytest.fixture
def conn(pg_url: str) -> Iterator[PgConnection]:
    raw = psycopg.connect(pg_url, autocommit=False)
    c = PgConnection(raw)
    try:
        yield c
    finally:
        c.close()


def test_the_stores_sql_runs_with_rows_by_index_and_name(conn: PgConnection) -> None:
    conn.execute("CREATE TABLE memories (id BIGINT PRIMARY KEY, content TEXT, score REAL)")
    conn.executemany(
        "INSERT INTO memories (id, content, score) VALUES (?, ?, ?)",
        [(1, "Deploys go to fly.io.", 0.5), (2, "100% of tests pass; is it '?'", 0.9)],
    )
    rows = conn.execute("SELECT id, content FROM memories WHERE score > ? ORDER BY id", (0.1,))
    got = rows.fetchall()
    assert [r["content"] for r in got] == ["Deploys go to fly.io.", "100% of tests pass; is it '?'"]
    assert (
        got[0][0] == 1
        and got[0].keys() == ["id", "content"]
        and got[0] == (1, "Deploys go to fly.io.")
    )
    like = conn.execute("SELECT id FROM memories WHERE content LIKE '100%'").fetchone()
    assert isinstance(like, PgRow) and like[0] == 2
    assert conn.execute("UPDATE memories SET score = 0 WHERE id = ?", (9,)).rowcount == 0
    assert dialect(conn) == "postgres" and dialect(object()) == "sqlite"


def test_user_text_is_bound_never_run(conn: PgConnection) -> None:
    conn.execute("CREATE TABLE t (content TEXT)")
    evil = "x'); DROP TABLE t; --"
    conn.execute("INSERT INTO t (content) VALUES (?)", (evil,))
    assert conn.execute("SELECT content FROM t").fetchall() == [(evil,)]


def test_a_missing_column_name_says_which_columns_there_are(conn: PgConnection) -> None:
    row = conn.execute("SELECT 1 AS a, 2 AS b").fetchone()
    assert row is not None
    with pytest.raises(IndexError, match=r"no column named 'c' \(columns: \('a', 'b'\)\)"):
        row["c"]

from __future__ import annotations

from pathlib import Path

import pytest

from ember.store.driver import Connection, errors
from ember.store.driver import connect as open_file
from ember.store.migrations import Migration, Schema, applied_migrations, migrate


def connect(path: Path) -> Connection:
    return open_file(path).conn


def test_migrations_apply_once_in_order(tmp_path: Path) -> None:
    conn = connect(tmp_path / "x.db")
    ms = [
        Migration("0001_a", "CREATE TABLE a (x INT);"),
        Migration("0002_b", "CREATE TABLE b (y INT);"),
    ]
    assert migrate(conn, ms) == ["0001_a", "0002_b"]
    assert migrate(conn, ms) == []
    assert applied_migrations(conn) == ["0001_a", "0002_b"]


def test_a_failing_migration_leaves_nothing_half_applied(tmp_path: Path) -> None:
    conn = connect(tmp_path / "x.db")
    bad = Migration("0001_bad", "CREATE TABLE ok (x INT);\nCREATE TABLE ok (x INT);")
    with pytest.raises(errors.OperationalError):
        migrate(conn, [bad])
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "ok" not in tables
    assert applied_migrations(conn) == []


def test_wal_mode(tmp_path: Path) -> None:
    conn = connect(tmp_path / "x.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_two_migrations_with_one_name_are_refused_when_the_schema_is_built() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        Schema("x", (Migration("0001_a", "SELECT 1;"), Migration("0001_a", "SELECT 2;")))

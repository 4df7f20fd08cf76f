"""What a feature asks of the store (``ember.store.sql``, ``Database.dialect``, ``Storage``)
is answered alike by a home's files and by a PostgreSQL store: each test runs on both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.store import sql
from ember.store.registry import Storage, stats_db_path, stats_where
from ember.store.schema import PROJECT


@pytest.fixture(params=["sqlite", "postgres"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    s = Storage(tmp_path, vec=False, store_url=url)
    try:
        yield s
    finally:
        s.close()


def _project(home: Path, name: str) -> Path:
    return home / "projects" / f"{name}-0123456789abcdef" / "ember.db"


def test_a_database_and_its_connections_speak_the_same_dialect(storage: Storage) -> None:
    """A feature picks its SQL by asking: the owner and every connection it hands out agree,
    on each backend (the memory store's text and vector indexes are chosen this way)."""
    backend = "postgres" if storage.postgres else "sqlite"
    db = storage.database(_project(storage.home, "demo"), PROJECT)
    assert db.dialect == backend
    assert db.read(sql.dialect) == backend
    assert db.write(sql.dialect) == backend


def test_the_paths_are_every_database_the_home_holds_on_either_backend(
    storage: Storage,
) -> None:
    """The dashboard lists a home's projects from ``paths``: the same paths whether the data
    is in files or in a server's schemas, and a database never written is not one of them."""
    home = storage.home
    written = [stats_db_path(home), home / "global" / "ember.db", _project(home, "demo")]
    storage.database(_project(home, "never"), PROJECT)  # an owner made, nothing written
    storage.stats().write(lambda c: None)
    for path in written[1:]:
        storage.database(path, PROJECT).write(lambda c: None)
    assert sorted(storage.paths()) == sorted(written)


def test_the_home_database_is_named_where_its_owner_says_it_is(storage: Storage) -> None:
    """Shaping names where its state is before any database is opened: the name is the one
    the home database's own errors give (the file, or the home schema on the server with
    no password)."""
    named = stats_where(storage.home, storage.store_url)
    assert named == storage.stats().where
    if storage.postgres:
        assert "ember_home" in named and str(storage.home) not in named
    else:
        assert named == str(storage.home / "stats.db")

"""A shadow test's project database on either backend (issue #24): a file, or the schema a
PostgreSQL store gives that file (``pg_url``: a real server, a fresh database per test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.store.database import Database
from ember.store.schema import PROJECT, for_postgres

BACKENDS = ["sqlite", "postgres"]


def project_db(backend: str, home: Path, request: pytest.FixtureRequest) -> Database:
    """The project database ``home/projects/p/ember.db`` would be, on ``backend``."""
    path = home / "projects" / "p" / "ember.db"
    if backend == "sqlite":
        path.parent.mkdir(parents=True, exist_ok=True)
        return Database(path, PROJECT)
    from ember.store.pg.database import PgDatabase
    from ember.store.pg.names import schema_name

    return PgDatabase(
        path,
        for_postgres(PROJECT),
        url=request.getfixturevalue("pg_url"),
        schema_name=schema_name(home, path),
        log_failures=False,
    )

"""What one PostgreSQL store holds: the schemas ember made in it (issue #24).

On files, a home's projects are the folders under ``projects/`` holding an ``ember.db``; on
PostgreSQL nothing is made in the home, so the dashboard and ``ember store copy`` ask the
server which schemas exist. Only the names ``names.schema_name`` gives are listed: a schema
someone else keeps in the same database is never read as a project.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ember.store.pg import pool as pools
from ember.store.pg.names import path_of


def schemas(url: str) -> list[str]:
    """Every schema of the database ember named (``ember_p_*``, ``ember_home``,
    ``ember_global``), by name; raises psycopg's error when the server cannot be reached."""
    pool = pools.acquire(url)
    try:
        with pool.connection() as conn:
            rows: list[Any] = conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'ember\\_%' ORDER BY nspname"
            ).fetchall()
    finally:
        pools.release(url)
    return [str(r[0]) for r in rows]


def home_paths(url: str, home: Path) -> list[Path]:
    """The file path under ``home`` of each schema the store holds for it (``path_of``), in
    schema order; schemas of other paths (a test's, a tool's) are left out."""
    return [p for s in schemas(url) if (p := path_of(home, s)) is not None]

"""What one PostgreSQL store holds: the schemas ember made in it, and the home path of
each.

On files, a home's projects are the folders under ``projects/`` holding an ``ember.db``; on
PostgreSQL nothing is made in the home, so the dashboard and ``ember store copy`` ask the
server. Invariants, and what each prevents:

- Only the schemas ``names.schema_name`` gives, and only once migrated (``_migrations``
  exists), are listed: a schema someone else keeps in the same database, or one a crashed
  start left empty, is never read as a project.
- A project schema maps back to the folder the project has in a home (``project_folder``):
  the one ``ember store copy`` recorded on the schema, else the one its identity (any
  exchange's ``project``) gives, else one made of the schema's own (lower-cased) name. The
  folder's schema is always the schema it came from, so a route or a copy by folder name
  reaches these rows; and the proxy finds a project copied back to files by that folder.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from ember.project import project_dir_name
from ember.store.pg import pool as pools
from ember.store.pg.migrate import quoted
from ember.store.pg.names import GLOBAL_SCHEMA, HOME_SCHEMA

#: What ``ember store copy`` writes on a project's schema: the folder the project has in a home.
COMMENT = "ember project folder: "
_PROJECT = re.compile(r"^ember_p_(?P<label>[a-z0-9_]*)_(?P<digest>[0-9a-f]{16})$")


def schemas(conn: Any) -> list[str]:
    """Every migrated ember schema of the database (``ember_p_*``, ``ember_home``,
    ``ember_global``), by name."""
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT n.nspname FROM pg_namespace n JOIN pg_tables t ON t.schemaname = n.nspname "
            "AND t.tablename = '_migrations' WHERE n.nspname IN (%s, %s) "
            "OR n.nspname LIKE 'ember\\_p\\_%%' ORDER BY n.nspname",
            (HOME_SCHEMA, GLOBAL_SCHEMA),
        ).fetchall()
    ]


def project_folder(conn: Any, schema: str) -> str | None:
    """The folder a project schema's data has in a home (None: not a project schema)."""
    found = _PROJECT.match(schema)
    if found is None:
        return None
    digest = found["digest"]
    row = conn.execute(
        "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
        (schema,),
    ).fetchone()
    comment = str(row[0] or "") if row else ""
    if comment.startswith(COMMENT) and comment.endswith("-" + digest):
        return comment[len(COMMENT) :]
    try:
        rows = conn.execute(
            f"SELECT DISTINCT project FROM {quoted(schema)}.exchanges "
            "WHERE project IS NOT NULL LIMIT 20"
        ).fetchall()
    except Exception:  # no exchanges table: the name below
        conn.rollback()
        rows = []
    for (identity,) in rows:
        if hashlib.sha256(str(identity).encode("utf-8")).hexdigest()[:16] == digest:
            is_path = "/" in str(identity) or "\\" in str(identity)
            return project_dir_name(str(identity), is_path=is_path)
    return f"{found['label'] or 'project'}-{digest}"


def path_in(conn: Any, home: Path, schema: str) -> Path | None:
    """The file path under ``home`` whose data ``schema`` holds (None: not ember's)."""
    if schema == HOME_SCHEMA:
        return home / "stats.db"
    if schema == GLOBAL_SCHEMA:
        return home / "global" / "ember.db"
    folder = project_folder(conn, schema)
    return None if folder is None else home / "projects" / folder / "ember.db"


def home_paths(url: str, home: Path) -> list[Path]:
    """The file path under ``home`` of each schema the store holds, in schema order; raises
    psycopg's error when the server cannot be reached."""
    pool = pools.acquire(url)
    try:
        with pool.connection() as conn:
            return [p for s in schemas(conn) if (p := path_in(conn, home, s)) is not None]
    finally:
        pools.release(url)

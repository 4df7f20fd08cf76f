"""The owner of one database on the target of ``ember store copy``, and ``--dry-run``.

A dry run does the whole copy of each database — the same lookups, numbers, counts and index
builds — in the target's one transaction, then rolls it back (the job raises ``Rehearsed``
with its report): what it says would be copied is what a real run copies, because it is what
that run would do, counted the same way.

Invariants, and what each prevents:

- A dry run leaves no database behind: a project the target lacks is rehearsed in a
  throwaway place (a temporary folder for a home; a schema of its own on PostgreSQL, dropped
  after), never created under its real name, where the proxy would find it empty.
- A dry run moves no identity sequence (``setval`` is not rolled back): the target's numbers
  go on from where they were.
- An existing target database is opened by its owner as for a real copy, so it is brought to
  the current schema first (what any ember command opening it does).
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ember.store.copy.ends import PG_HOME, End, Unit, target_schema
from ember.store.database import Database
from ember.store.migrations import Schema
from ember.store.schema import PROJECT, STATS, for_postgres

T = TypeVar("T")


class Rehearsed(Exception):
    """Raised by a dry run's job with what it counted: the writer rolls its work back."""

    def __init__(self, result: Any) -> None:
        super().__init__("dry run")
        self.result = result


def written(db: Database, job: Callable[[Any], T]) -> T:
    """``job`` run as one exclusive write of ``db``; a dry run's counts once rolled back."""
    try:
        return db.write(job, exclusive=True, label="store copy")
    except Rehearsed as done:
        result: T = done.result
        return result


@contextlib.contextmanager
def target(unit: Unit, dst: End, dry_run: bool) -> Iterator[tuple[Database, str | None]]:
    """The owner of ``unit`` on ``dst`` and its PostgreSQL schema (None for a home)."""
    schema: Schema = STATS if unit.kind == "stats" else PROJECT
    if dst.url is not None:
        with _pg_target(unit, dst.url, schema, dry_run) as found:
            yield found
        return
    assert dst.home is not None
    path = dst.home / unit.rel
    spare = None
    if dry_run and not path.exists():
        spare = Path(tempfile.mkdtemp(prefix="ember-dry-run-"))
        path = spare / unit.rel
    db = Database(path, schema, vec=True, log_failures=False)
    try:
        yield db, None
    finally:
        db.close()
        if spare is not None:
            shutil.rmtree(spare, ignore_errors=True)


@contextlib.contextmanager
def _pg_target(
    unit: Unit, url: str, schema: Schema, dry_run: bool
) -> Iterator[tuple[Database, str | None]]:
    from ember.store.pg.database import PgDatabase

    name = target_schema(unit)
    spare = dry_run and not _has_schema(url, name)
    if spare:
        name = f"ember_f_dry_run_{secrets.token_hex(8)}"
    db = PgDatabase(
        PG_HOME / unit.rel, for_postgres(schema), url=url, schema_name=name, log_failures=False
    )
    try:
        yield db, name
    finally:
        db.close()
        if spare:
            _drop_schema(url, name)


def _has_schema(url: str, name: str) -> bool:
    import psycopg

    from ember.store.pg.pool import bounded

    with psycopg.connect(bounded(url)) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (name,)).fetchone()
    return found is not None


def _drop_schema(url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    from ember.store.pg.pool import bounded

    with psycopg.connect(bounded(url), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))

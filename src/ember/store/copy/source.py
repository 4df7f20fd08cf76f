"""The source of ``ember store copy``: its databases, each read in one snapshot, never written.

Invariants, and what each prevents:

- A SQLite source file is opened read-only (``mode=ro``, ``query_only``) and never migrated:
  a copy taken off a home that a proxy still uses cannot change it, and an older file is read
  as it is (the tables and columns it has).
- A PostgreSQL source is read in a ``REPEATABLE READ, READ ONLY`` transaction per schema, with
  every name qualified by its schema: one snapshot, and nothing in it can write.
- An unreachable server is one line naming ``redacted(url)``, never the URL.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ember.store.copy.ends import CopyError, End, Unit, home_units, server_units
from ember.store.driver import connect, errors
from ember.store.pg.connection import Dialect
from ember.store.pg.url import redacted, scrubbed


def unreachable(url: str, exc: BaseException) -> CopyError:
    """``exc`` (a failed connection) as one line; its words only when they hold no part of
    the URL that could be secret."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if scrubbed(detail, url) != detail:  # it quotes the password: its words stay out
        detail = type(exc).__name__
    return CopyError(
        f"cannot reach PostgreSQL at {redacted(url)} ({detail}); check that the server is "
        "running and reachable from here, and the user, password and database of the URL"
    )


class Source:
    """One end read as a source. ``snapshot(unit)`` yields ``(connection, schema)``: the
    schema is None on SQLite (the file is the database)."""

    def __init__(self, end: End) -> None:
        self.end = end
        self.dialect: Dialect = "postgres" if end.postgres else "sqlite"
        self._pg: Any = None

    def __enter__(self) -> Source:
        if self.end.url is not None:
            import psycopg

            from ember.store.pg.pool import bounded

            try:
                self._pg = psycopg.connect(bounded(self.end.url), autocommit=False)
            except psycopg.Error as exc:
                raise unreachable(self.end.url, exc) from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pg is not None:
            self._pg.close()

    def units(self) -> list[Unit]:
        if self._pg is not None:
            found = server_units(self._pg)
            self._pg.rollback()
            return found
        assert self.end.home is not None
        return home_units(self.end.home)

    @contextlib.contextmanager
    def snapshot(self, unit: Unit) -> Iterator[tuple[Any, str | None]]:
        if self._pg is not None:
            self._pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            try:
                yield self._pg, unit.schema
            finally:
                self._pg.rollback()
            return
        assert self.end.home is not None
        path = self.end.home / unit.rel
        try:
            conn = connect(path, readonly=True).conn
        except errors.Error as exc:
            raise CopyError(f"{path} cannot be read ({exc})") from exc
        try:
            conn.execute("BEGIN")
            yield conn, None
        finally:
            with contextlib.suppress(errors.Error):
                conn.execute("ROLLBACK")
            conn.close()

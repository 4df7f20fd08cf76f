"""A PostgreSQL connection that speaks the store's SQL.

Every query function of the store and of the features takes a connection and runs SQLite's
DB-API dialect on it: ``?`` parameters, ``conn.execute(sql, params)`` returning a cursor, rows
read by index (``row[0]``) and by name (``row["content"]``). ``PgConnection`` gives a psycopg
connection that surface, so those functions run unchanged on either backend wherever their SQL
is common to both. Where it is not, a function asks ``dialect(conn)`` and says each statement
in full; nothing here rewrites SQL by pattern beyond the parameter marks (a rewrite that
guesses at ``INSERT OR IGNORE`` or ``GROUP_CONCAT`` fails on the one statement it misreads).

Invariants, and what each prevents:

- ``?`` becomes ``%s`` only outside quoted strings, identifiers and comments, and a literal
  ``%`` is doubled: a ``LIKE '%x%'`` or a ``'?'`` inside a string never shifts the parameters.
- A statement with parameters is sent with them bound by the server, never formatted into
  the text: user text (a memory, an ask) cannot become SQL.
- ``lastrowid`` is never guessed (PostgreSQL has no rowid): a function that needs the new id
  says ``RETURNING id`` for PostgreSQL and reads it from the row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    import psycopg

Dialect = Literal["sqlite", "postgres"]


def dialect(conn: Any) -> Dialect:
    """Which SQL ``conn`` speaks: ``postgres`` for a ``PgConnection``, else SQLite's."""
    return "postgres" if isinstance(conn, PgConnection) else "sqlite"


def truncated(expr: str) -> dict[Dialect, str]:
    """SQL of each dialect for the whole part of ``expr`` (a non-negative number): a time's
    hour or day. SQLite's ``CAST(x AS INTEGER)`` truncates; PostgreSQL's rounds, and there a
    request made after noon was put on the next day."""
    return {"sqlite": f"CAST({expr} AS INTEGER)", "postgres": f"CAST(floor({expr}) AS BIGINT)"}


def qmarks(sql: str) -> str:
    """``sql`` with each ``?`` parameter mark as psycopg's ``%s`` and each ``%`` doubled, both
    only outside '...' strings, "..." identifiers and -- comments."""
    out: list[str] = []
    quote: str | None = None
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if quote is not None:
            out.append("%%" if c == "%" else c)
            if c == quote:
                quote = None
        elif c in ("'", '"'):
            quote = c
            out.append(c)
        elif c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            out.append(sql[i:end].replace("%", "%%"))
            i = end
            continue
        elif c == "?":
            out.append("%s")
        elif c == "%":
            out.append("%%")
        else:
            out.append(c)
        i += 1
    return "".join(out)


class PgRow(Sequence[Any]):
    """One row, read by position or by column name, like ``sqlite3.Row``."""

    __slots__ = ("_names", "_values")

    def __init__(self, names: tuple[str, ...], values: Sequence[Any]) -> None:
        self._names = names
        self._values = tuple(values)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            try:
                return self._values[self._names.index(key)]
            except ValueError:
                raise IndexError(f"no column named {key!r} (columns: {self._names})") from None
        return self._values[key]

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PgRow):
            return self._values == other._values
        if isinstance(other, tuple):
            return self._values == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values)

    def __repr__(self) -> str:
        return f"PgRow({dict(zip(self._names, self._values, strict=True))!r})"

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: Any) -> Any:
    names = tuple(c.name for c in cursor.description or ())
    return lambda values: PgRow(names, values)


class PgCursor:
    """The result of one statement: ``fetchone``, ``fetchall``, iteration, ``rowcount``."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def description(self) -> Any:
        return self._cursor.description

    def fetchone(self) -> PgRow | None:
        if self._cursor.description is None:
            return None
        row: PgRow | None = self._cursor.fetchone()
        return row

    def fetchall(self) -> list[PgRow]:
        if self._cursor.description is None:
            return []
        return list(self._cursor.fetchall())

    def __iter__(self) -> Iterator[PgRow]:
        return iter(self.fetchall())


class PgConnection:
    """A psycopg connection seen through the store's DB-API surface. Transactions are the
    caller's (``transaction()``); ``commit``/``rollback`` are passed through."""

    def __init__(self, conn: psycopg.Connection[Any], *, writer_locked: bool = False) -> None:
        """``writer_locked``: the transaction holds its schema's writer lock (a write batch,
        ``serial.WRITER_LOCK``): a job asking for it (``serial.one_writer``) has it."""
        conn.row_factory = _row_factory
        self.raw = conn
        self.writer_locked = writer_locked

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PgCursor:
        cur = self.raw.cursor()
        if not params:
            # no parameters: psycopg sends the text as written (a '%' is not a mark then)
            cur.execute(cast(Any, sql))
        else:
            cur.execute(cast(Any, qmarks(sql)), tuple(params))
        return PgCursor(cur)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> PgCursor:
        cur = self.raw.cursor()
        cur.executemany(cast(Any, qmarks(sql)), [tuple(r) for r in rows])
        return PgCursor(cur)

    def transaction(self) -> Any:
        """A transaction block (a savepoint inside another one)."""
        return self.raw.transaction()

    def commit(self) -> None:
        self.raw.commit()

    def rollback(self) -> None:
        self.raw.rollback()

    def close(self) -> None:
        self.raw.close()

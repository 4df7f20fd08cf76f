"""Reading a table's rows from the source and adding them to the target, batch by batch.

Each batch goes into a temporary staging table on the target (psycopg's ``COPY ... FROM
STDIN`` on PostgreSQL, ``executemany`` on SQLite), then into the table with one statement that
keeps what is there (``ON CONFLICT DO NOTHING``, ``INSERT OR IGNORE``), then the staged rows are
compared with the table's by key.

Invariants, and what each prevents:

- A row already in the target under the same key is never overwritten: a target that took
  writes of its own keeps them, and a second run copies nothing.
- Every staged row is counted once as copied, already there (the target's row under its key
  is equal, column by column, ``IS NOT DISTINCT FROM``: NULLs equal) or in conflict (the
  target holds another row under its key, or under another unique key): a conflict is
  reported with sample keys, never resolved silently.
- Keys are the source's (``OVERRIDING SYSTEM VALUE``), except in a table the store numbers
  itself (``renumber``): there a row found by its natural key keeps the target's number and
  a new one gets a free one, and every row pointing at it follows, so the vectors, evidence
  and links of a memory stay attached to it.
- A row the target holds under its key, different, of a table the target keeps
  (``policy.TARGET_KEEPS``) is counted as kept, not as a conflict.
- The source is only read: SQLite in a read-only connection, PostgreSQL in a read-only
  transaction, both one snapshot per database.
- A NUL character in SQLite text goes to PostgreSQL as U+FFFD, as ember writes it there
  (``store/transcript_rows.py``): PostgreSQL's ``text`` cannot hold a NUL, and one tool output
  that printed it would otherwise fail the whole project's copy.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ember.store.copy.catalog import Table, ident
from ember.store.copy.renumber import Maps, Plan
from ember.store.pg.connection import Dialect

#: Rows per batch (one COPY, one INSERT ... SELECT, one comparison).
BATCH = 2000
#: Keys of conflicting rows kept for the report, per table.
SAMPLES = 3
_STAGE = "_ember_copy_stage"


@dataclass
class Counts:
    copied: int = 0
    already: int = 0
    conflicts: int = 0
    #: rows the target holds under their key, different, kept (``policy.TARGET_KEEPS``)
    kept: int = 0
    samples: list[list[Any]] = field(default_factory=list)


def _filter(table: Table, owned: tuple[str, frozenset[str]] | None) -> tuple[str, list[str]]:
    if owned is None:
        return "", []
    column, keys = owned
    marks = ", ".join("?" for _ in keys)
    return f" WHERE {ident(column)} NOT IN ({marks})", sorted(keys)


def source_rows(
    conn: Any,
    dialect: Dialect,
    table: Table,
    columns: Sequence[str],
    owned: tuple[str, frozenset[str]] | None = None,
    schema: str | None = None,
) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of ``table`` (its ``columns``), in key order, ``BATCH`` at a time; the rows
    the target owns (``policy.OWNED_ROWS``) left out."""
    where, params = _filter(table, owned)
    name = ident(table.name) if schema is None else f"{ident(schema)}.{ident(table.name)}"
    cols = ", ".join(ident(c) for c in columns)
    order = ", ".join(ident(c) for c in table.key)
    sql = f"SELECT {cols} FROM {name}{where} ORDER BY {order}"
    if dialect == "postgres":
        with conn.cursor(name="ember_copy") as cur:
            cur.itersize = BATCH
            cur.execute(sql.replace("?", "%s"), params)
            while batch := cur.fetchmany(BATCH):
                yield [tuple(r) for r in batch]
        return
    cur = conn.execute(sql, params)
    while batch := cur.fetchmany(BATCH):
        yield [tuple(r) for r in batch]


def source_count(
    conn: Any,
    dialect: Dialect,
    table: Table,
    owned: tuple[str, frozenset[str]] | None = None,
    schema: str | None = None,
) -> int:
    where, params = _filter(table, owned)
    name = ident(table.name) if schema is None else f"{ident(schema)}.{ident(table.name)}"
    sql = f"SELECT count(*) FROM {name}{where}"
    if dialect == "postgres":
        sql = sql.replace("?", "%s")
    row = conn.execute(sql, params).fetchone()
    return int(row[0])


class Loader:
    """Adds batches to one table of the target, inside the caller's transaction. ``conn``:
    the raw psycopg connection (PostgreSQL) or the SQLite writer's connection. ``maps``: the
    numbers given so far in this database (``renumber``); None copies every key as it is."""

    def __init__(
        self,
        conn: Any,
        dialect: Dialect,
        table: Table,
        columns: Sequence[str],
        maps: Maps | None = None,
    ) -> None:
        self.conn, self.dialect, self.table = conn, dialect, table
        self.columns = tuple(columns)
        self.counts = Counts()
        self._cols = ", ".join(ident(c) for c in self.columns)
        self._name = ident(table.name)
        self._stage = _STAGE if dialect == "postgres" else f"temp.{_STAGE}"
        self._target = self._name if dialect == "postgres" else f"main.{self._name}"
        self.plan = (
            None
            if maps is None
            else Plan(maps, table, self.columns, stage=self._stage, ref=_STAGE, target=self._target)
        )
        self._run(f"DROP TABLE IF EXISTS {self._stage}")
        if dialect == "postgres":
            self._run(
                f"CREATE TEMP TABLE {_STAGE} ON COMMIT DROP AS "
                f"SELECT {self._cols} FROM {self._name} WITH NO DATA"
            )
        else:
            self._run(
                f"CREATE TEMP TABLE {_STAGE} AS SELECT {self._cols} FROM {self._target} WHERE 0"
            )
        for extra in self.plan.extra_columns() if self.plan is not None else ():
            self._run(f"ALTER TABLE {self._stage} ADD COLUMN {extra} BIGINT")

    def _run(self, sql: str) -> Any:
        return self.conn.execute(sql)

    def add(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Stage ``rows`` and add the new ones; counts every row (module docstring)."""
        if not rows:
            return
        self._stage_rows(rows)
        if self.plan is not None:
            _, keys = self.plan.prepare(self._run, SAMPLES - len(self.counts.samples))
            self.counts.samples += keys
        inserted = self._insert()
        same = self._same()
        kept = self._present() - same if self.plan is not None and self.plan.keeps else 0
        self.counts.copied += inserted
        self.counts.already += same - inserted
        self.counts.kept += kept
        self.counts.conflicts += len(rows) - same - kept
        if len(rows) > same + kept and len(self.counts.samples) < SAMPLES:
            self.counts.samples += self._conflicting(SAMPLES - len(self.counts.samples))
        if self.plan is not None:
            self.plan.settle(self._run)
        self._run(f"DELETE FROM {self._stage}")

    def _stage_rows(self, rows: Sequence[tuple[Any, ...]]) -> None:
        if self.dialect == "postgres":
            with (
                self.conn.cursor() as cur,
                cur.copy(f"COPY {_STAGE} ({self._cols}) FROM STDIN") as copy,
            ):
                for row in rows:
                    copy.write_row(tuple(_pg_value(v) for v in row))
            return
        marks = ", ".join("?" for _ in self.columns)
        self.conn.executemany(f"INSERT INTO {self._stage} ({self._cols}) VALUES ({marks})", rows)

    def _insert(self) -> int:
        order = ", ".join(ident(c) for c in self.table.key)
        select = f"SELECT {self._cols} FROM {self._stage} ORDER BY {order}"
        if self.dialect == "postgres":
            override = " OVERRIDING SYSTEM VALUE" if self.table.identity else ""
            cur = self._run(
                f"INSERT INTO {self._name} ({self._cols}){override} {select} ON CONFLICT DO NOTHING"
            )
            return int(cur.rowcount)
        self._run(f"INSERT OR IGNORE INTO {self._target} ({self._cols}) {select}")
        return int(self._run("SELECT changes()").fetchone()[0])

    def _on(self) -> str:
        return " AND ".join(f"s.{ident(c)} = t.{ident(c)}" for c in self.table.key)

    def _matched(self) -> str:
        """``FROM stage s JOIN table t`` on the key, with every column equal."""
        same = " IS NOT DISTINCT FROM " if self.dialect == "postgres" else " IS "
        # a primary key is never NULL (and ``=`` keeps PostgreSQL's join on its index)
        eq = same if self.table.key == self.columns else " = "
        on = " AND ".join(f"s.{ident(c)}{eq}t.{ident(c)}" for c in self.table.key)
        equal = " AND ".join(f"s.{ident(c)}{same}t.{ident(c)}" for c in self.columns)
        return f"FROM {self._stage} s JOIN {self._target} t ON {on} AND {equal}"

    def _same(self) -> int:
        row = self._run(f"SELECT count(*) {self._matched()}").fetchone()
        return int(row[0])

    def _present(self) -> int:
        """Staged rows whose key the target has (equal or not)."""
        on = self._on()
        row = self._run(f"SELECT count(*) FROM {self._stage} s JOIN {self._target} t ON {on}")
        return int(row.fetchone()[0])

    def _conflicting(self, limit: int) -> list[list[Any]]:
        shown = self.plan.shown_key() if self.plan is not None else None
        key = ", ".join(shown or [f"s.{ident(c)}" for c in self.table.key])
        on = " AND ".join(f"m.{ident(c)} = s.{ident(c)}" for c in self.table.key)
        present = ""
        if self.plan is not None and self.plan.keeps:
            present = f" AND NOT EXISTS (SELECT 1 FROM {self._target} t WHERE {self._on()})"
        found = self._run(
            f"SELECT {key} FROM {self._stage} s WHERE NOT EXISTS (SELECT 1 FROM "
            f"(SELECT s.* {self._matched()}) m WHERE {on}){present} LIMIT {int(limit)}"
        ).fetchall()
        return [list(r) for r in found]

    def close(self) -> None:
        self._run(f"DROP TABLE IF EXISTS {self._stage}")


def _pg_value(value: Any) -> Any:
    """``value`` as PostgreSQL can store it (a NUL in text as U+FFFD)."""
    if isinstance(value, str) and "\x00" in value:
        return value.replace("\x00", "\ufffd")
    return value

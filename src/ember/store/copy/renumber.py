"""Giving a second home's rows their own numbers in a store already in use (a merge).

Two homes each number their exchanges, memories and transcript messages from 1, so the
source's number of a row says nothing about the target's rows under that number. For each
table of ``policy.RENUMBERED``, each staged batch (``load.Loader``) is prepared before it goes
in:

1. the columns that point at a renumbered table are rewritten to the parent's number in the
   target (foreign keys from the catalog; ``policy.WATERMARKS`` for positions no foreign key
   declares), and a row whose parent is not in the target is left out, counted as a
   conflict;
2. each row is looked for by its natural key (``policy.Renumbered.natural``): found, it takes
   the number the target gave it (a second copy of the same home finds every row);
3. a new row keeps its own number when every new number of the table is past the target's
   highest (a copy into an empty store changes no number), else all of them move past it by
   one offset, in the source's order;
4. the numbers given are recorded in a temporary map per table (``Maps``), which the tables
   copied after it read in step 1.

Invariants, and what each prevents:

- The mapping keeps the source's order: rows are read in key order and new numbers are one
  offset from the old, so a watermark "read up to seq N" is mapped to the last copied row at
  or before N and still splits the same rows into read and unread.
- A number handed out is past both the highest key and the table's sequence (SQLite's
  ``sqlite_sequence``, PostgreSQL's identity): ``memories.seq`` is never reused, and an index
  entry left for a deleted memory never names a copied one.
- A new row that did not go in (another unique key of the target holds it) loses its map
  entry: its children are left out as conflicts rather than attached to another row.
- Numbers are formatted into SQL only as ``int``; names come from the catalog, quoted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ember.store.copy import policy
from ember.store.copy.catalog import Table, ident
from ember.store.pg.connection import Dialect

Run = Callable[[str], Any]


class Maps:
    """The target's number of every source row of each renumbered table, for this copy of one
    database: temporary tables on the target's connection, dropped at the end."""

    def __init__(self, run: Run, dialect: Dialect) -> None:
        self.run, self.dialect = run, dialect
        self._made: set[str] = set()

    def name(self, table: str) -> str:
        bare = ident(f"_ember_map_{table}")
        return bare if self.dialect == "postgres" else f"temp.{bare}"

    def create(self, table: str) -> None:
        self.run(f"DROP TABLE IF EXISTS {self.name(table)}")
        drop = " ON COMMIT DROP" if self.dialect == "postgres" else ""
        where = "TEMP TABLE " + ident(f"_ember_map_{table}")
        if self.dialect == "sqlite":
            where = "TABLE " + self.name(table)
        self.run(f"CREATE {where} (src BIGINT PRIMARY KEY, dst BIGINT NOT NULL){drop}")
        self._made.add(table)

    def has(self, table: str) -> bool:
        return table in self._made

    def drop(self) -> None:
        for table in sorted(self._made):
            self.run(f"DROP TABLE IF EXISTS {self.name(table)}")
        self._made.clear()


class Plan:
    """How one table's staged rows are prepared (module docstring). ``stage``: the staging
    table as written in DML; ``ref``: its bare name, for correlated references."""

    def __init__(
        self,
        maps: Maps,
        table: Table,
        columns: Sequence[str],
        *,
        stage: str,
        ref: str,
        target: str,
    ) -> None:
        self.maps, self.table, self.columns = maps, table, tuple(columns)
        self.stage, self.ref, self.target = stage, ref, target
        self.spec = policy.RENUMBERED.get(table.name)
        if self.spec is not None and self.spec.key not in columns:
            self.spec = None
        self.keeps = table.name in policy.TARGET_KEEPS
        self.refs = [(c, p) for c, p in table.refs if c in columns and maps.has(p)]
        marks = policy.WATERMARKS.get(table.name, {})
        self.marks = [(c, p, e) for c, (p, e) in marks.items() if c in columns and maps.has(p)]
        self.offset: int | None = None
        if self.spec is not None:
            maps.create(table.name)

    @property
    def active(self) -> bool:
        return self.spec is not None or bool(self.refs) or bool(self.marks)

    def extra_columns(self) -> list[str]:
        """Columns the staging table needs besides the table's own."""
        return ["_src", "_new"] if self.spec is not None else []

    def prepare(self, run: Run, samples: int) -> tuple[int, list[list[Any]]]:
        """Rewrite the staged batch; returns the rows left out (no parent) and a few keys."""
        left, found = 0, list[list[Any]]()
        for column, parent in self.refs:
            n, keys = self._remap(run, column, parent, samples - len(found))
            left, found = left + n, found + keys
        for column, parent, edge in self.marks:
            self._position(run, column, parent, edge)
        if self.spec is not None:
            self._renumber(run)
        return left, found

    def _remap(
        self, run: Run, column: str, parent: str, samples: int
    ) -> tuple[int, list[list[Any]]]:
        col, m = ident(column), self.maps.name(parent)
        missing = (
            f"{col} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {m} m WHERE m.src = {self.ref}.{col})"
        )
        keys = ", ".join(ident(c) for c in self.table.key)
        gone = [list(r) for r in run(f"DELETE FROM {self.stage} WHERE {missing} RETURNING {keys}")]
        run(
            f"UPDATE {self.stage} SET {col} = (SELECT m.dst FROM {m} m "
            f"WHERE m.src = {self.ref}.{col}) WHERE {col} IS NOT NULL"
        )
        return len(gone), gone[: max(0, samples)]

    def _position(self, run: Run, column: str, parent: str, edge: policy.Edge) -> None:
        """``column`` to the same place among the parent's copied rows (module docstring)."""
        col, m, here = ident(column), self.maps.name(parent), f"{self.ref}.{ident(column)}"
        if edge == "through":
            at = f"SELECT m.dst FROM {m} m WHERE m.src <= {here} ORDER BY m.src DESC LIMIT 1"
            near = f"SELECT m.dst - 1 FROM {m} m WHERE m.src > {here} ORDER BY m.src LIMIT 1"
        else:
            at = f"SELECT m.dst FROM {m} m WHERE m.src >= {here} ORDER BY m.src LIMIT 1"
            near = f"SELECT m.dst + 1 FROM {m} m WHERE m.src < {here} ORDER BY m.src DESC LIMIT 1"
        run(
            f"UPDATE {self.stage} SET {col} = COALESCE(({at}), ({near}), {col}) "
            f"WHERE {col} IS NOT NULL"
        )

    def _renumber(self, run: Run) -> None:
        assert self.spec is not None
        key = ident(self.spec.key)
        run(f"UPDATE {self.stage} SET _src = {key}, {key} = NULL, _new = 0")
        run(self._found())
        row = run(f"SELECT min(_src) FROM {self.stage} WHERE {key} IS NULL").fetchone()
        if row is not None and row[0] is not None:
            if self.offset is None:
                top = high_water(run, self.maps.dialect, self.table, self.spec.key)
                self.offset = 0 if int(row[0]) > top else top - int(row[0]) + 1
            run(
                f"UPDATE {self.stage} SET {key} = _src + {int(self.offset)}, _new = 1 "
                f"WHERE {key} IS NULL"
            )
        ignore = "INSERT OR IGNORE" if self.maps.dialect == "sqlite" else "INSERT"
        tail = "" if self.maps.dialect == "sqlite" else " ON CONFLICT DO NOTHING"
        run(
            f"{ignore} INTO {self.maps.name(self.table.name)} (src, dst) "
            f"SELECT _src, {key} FROM {self.stage}{tail}"
        )

    def _found(self) -> str:
        """Each staged row given the target's key of the row with its natural key. A join
        (``UPDATE ... FROM``), not a lookup per row: a natural key with no index of its own
        (an evidence row's columns) is matched by one hash join on PostgreSQL and through an
        automatic index on SQLite, where a lookup per row read the whole table each time."""
        assert self.spec is not None
        natural = self.spec.natural or tuple(c for c in self.columns if c != self.spec.key)
        eq = " AND ".join(self._equal(c) for c in natural)
        key = ident(self.spec.key)
        return f"UPDATE {self.stage} AS s SET {key} = t.{key} FROM {self.target} AS t WHERE {eq}"

    def _equal(self, column: str) -> str:
        assert self.spec is not None
        t, s = f"t.{ident(column)}", f"s.{ident(column)}"
        if column in self.spec.nocase:
            if self.maps.dialect == "sqlite":
                return f"{t} = {s} COLLATE NOCASE"
            return f"lower({t}) = lower({s})"
        if column in self.table.notnull:
            return f"{t} = {s}"
        return f"{t} IS {s}" if self.maps.dialect == "sqlite" else f"{t} IS NOT DISTINCT FROM {s}"

    def shown_key(self) -> list[str]:
        """How a conflicting staged row (alias ``s``) is named: by its key in the source."""
        key = self.spec.key if self.spec is not None else None
        return ["s._src" if c == key else f"s.{ident(c)}" for c in self.table.key]

    def settle(self, run: Run) -> None:
        """Forget the numbers of new rows that did not go in: their children are left out."""
        if self.spec is None:
            return
        m, key = self.maps.name(self.table.name), ident(self.spec.key)
        run(
            f"DELETE FROM {m} WHERE src IN (SELECT _src FROM {self.stage} WHERE _new = 1) "
            f"AND NOT EXISTS (SELECT 1 FROM {self.target} t WHERE t.{key} = {m}.dst)"
        )


def high_water(run: Run, dialect: Dialect, table: Table, key: str) -> int:
    """The highest number ``table`` has handed out for ``key``: its largest key, or its
    sequence when that is past it (numbers of deleted rows are never handed out again)."""
    name = ident(table.name)
    row = run(f"SELECT max({ident(key)}) FROM {name}").fetchone()
    top = int(row[0]) if row is not None and row[0] is not None else 0
    if dialect == "sqlite":
        if run("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'").fetchone():
            seq = run(
                f"SELECT seq FROM sqlite_sequence WHERE name = '{table.name.replace(chr(39), '')}'"
            ).fetchone()
            if seq is not None and seq[0] is not None:
                top = max(top, int(seq[0]))
        return top
    if key in table.identity:
        found = run(
            f"SELECT pg_get_serial_sequence('{name.replace(chr(39), '')}', "
            f"'{key.replace(chr(39), '')}')"
        ).fetchone()
        if found is not None and found[0] is not None:
            last = run(f"SELECT last_value, is_called FROM {found[0]}").fetchone()
            if last is not None:
                top = max(top, int(last[0]) if last[1] else int(last[0]) - 1)
    return top

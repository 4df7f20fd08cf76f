"""What tables a database holds, read from its own catalog (``ember store copy``).

The copy never keeps a list of ember's tables: each side's catalog says which tables exist,
their columns, primary keys, identity columns and foreign keys, so a feature that starts to
run on PostgreSQL (its migrations gain their ``postgres`` form) has its tables copied with no
change here.

Invariants, and what each prevents:

- Only ordinary tables are listed: SQLite's virtual tables (FTS5, sqlite-vec) and the shadow
  tables they keep (``memory_fts_data``...) are indexes, never rows to copy; copied, a shadow
  table's pages would disagree with its virtual table.
- ``ordered`` puts a table after every table it references (foreign keys): a child row
  inserted before its parent fails the constraint on either backend.
- Names come from the catalog and are always quoted as identifiers (``ident``).
- ``refs`` names the column of each single-column foreign key and the table it points at:
  the merge (``renumber``) rewrites exactly those columns when it gives a parent a new key,
  so a memory's vectors, evidence and links follow it to its number in the target.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ember.store.pg.connection import Dialect


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    #: the primary key's columns (every column when the table has none)
    key: tuple[str, ...]
    #: identity columns (PostgreSQL ``GENERATED ... AS IDENTITY``): moved past the copy
    identity: tuple[str, ...] = ()
    #: the tables this one references
    parents: frozenset[str] = field(default_factory=frozenset)
    #: (column, table it references) of each single-column foreign key
    refs: tuple[tuple[str, str], ...] = ()
    #: the columns declared NOT NULL
    notnull: frozenset[str] = field(default_factory=frozenset)


def ident(name: str) -> str:
    """``name`` as a quoted identifier in either dialect."""
    return '"' + name.replace('"', '""') + '"'


def tables(conn: Any, dialect: Dialect, schema: str | None = None) -> dict[str, Table]:
    """Every ordinary table of the database (SQLite) or of ``schema`` (PostgreSQL)."""
    if dialect == "sqlite":
        return _sqlite_tables(conn)
    assert schema is not None
    return _pg_tables(conn, schema)


def _sqlite_tables(conn: Any) -> dict[str, Table]:
    rows = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"
    ).fetchall()
    virtual = [str(r[0]) for r in rows if str(r[1] or "").upper().startswith("CREATE VIRTUAL")]
    out: dict[str, Table] = {}
    for r in rows:
        name = str(r[0])
        if name in virtual or name.startswith("sqlite_"):
            continue
        if any(name.startswith(v + "_") for v in virtual):
            continue  # a virtual table's own storage
        info = conn.execute(f"PRAGMA table_info({ident(name)})").fetchall()
        columns = tuple(str(c[1]) for c in info)
        pk = tuple(str(c[1]) for c in sorted((c for c in info if c[5]), key=lambda c: c[5]))
        fks = conn.execute(f"PRAGMA foreign_key_list({ident(name)})").fetchall()
        parents = frozenset(str(f[2]) for f in fks) - {name}
        single = [f for f in fks if sum(1 for g in fks if g[0] == f[0]) == 1]
        refs = tuple(sorted((str(f[3]), str(f[2])) for f in single))
        notnull = frozenset(str(c[1]) for c in info if c[3] or c[5])
        out[name] = Table(name, columns, pk or columns, (), parents, refs, notnull)
    return out


_PG_COLUMNS = """
SELECT c.table_name, c.column_name, c.is_identity, c.is_nullable
FROM information_schema.columns c JOIN information_schema.tables t
  ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = %s AND t.table_type = 'BASE TABLE'
ORDER BY c.table_name, c.ordinal_position
"""
_PG_KEYS = """
SELECT cl.relname, a.attname
FROM pg_index i
JOIN pg_class cl ON cl.oid = i.indrelid
JOIN pg_namespace n ON n.oid = cl.relnamespace
JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON TRUE
JOIN pg_attribute a ON a.attrelid = cl.oid AND a.attnum = k.attnum
WHERE n.nspname = %s AND i.indisprimary
ORDER BY cl.relname, k.ord
"""
_PG_PARENTS = """
SELECT cl.relname, ref.relname, CASE WHEN cardinality(co.conkey) = 1 THEN a.attname END
FROM pg_constraint co
JOIN pg_class cl ON cl.oid = co.conrelid
JOIN pg_class ref ON ref.oid = co.confrelid
JOIN pg_namespace n ON n.oid = cl.relnamespace
JOIN pg_attribute a ON a.attrelid = cl.oid AND a.attnum = co.conkey[1]
WHERE n.nspname = %s AND co.contype = 'f'
"""


def _pg_tables(conn: Any, schema: str) -> dict[str, Table]:
    columns: dict[str, list[str]] = {}
    identity: dict[str, list[str]] = {}
    notnull: dict[str, set[str]] = {}
    for table, column, is_identity, nullable in conn.execute(_PG_COLUMNS, (schema,)).fetchall():
        columns.setdefault(table, []).append(column)
        if is_identity == "YES":
            identity.setdefault(table, []).append(column)
        if nullable == "NO":
            notnull.setdefault(table, set()).add(column)
    keys: dict[str, list[str]] = {}
    for table, column in conn.execute(_PG_KEYS, (schema,)).fetchall():
        keys.setdefault(table, []).append(column)
    parents: dict[str, set[str]] = {}
    refs: dict[str, list[tuple[str, str]]] = {}
    for table, parent, column in conn.execute(_PG_PARENTS, (schema,)).fetchall():
        if parent != table:
            parents.setdefault(table, set()).add(parent)
        if column is not None:
            refs.setdefault(table, []).append((column, parent))
    return {
        name: Table(
            name,
            tuple(cols),
            tuple(keys.get(name) or cols),
            tuple(identity.get(name, ())),
            frozenset(parents.get(name, ())),
            tuple(sorted(refs.get(name, ()))),
            frozenset(notnull.get(name, ())),
        )
        for name, cols in columns.items()
    }


def ordered(
    found: Sequence[Table], after: Mapping[str, frozenset[str]] | None = None
) -> list[Table]:
    """``found`` with every table after the tables it references (among ``found``) and the
    tables ``after`` names for it (references no foreign key declares), else by name; a
    cycle (none in ember's schemas) keeps the rest in name order."""
    todo = {t.name: t for t in sorted(found, key=lambda t: t.name)}
    extra = after or {}
    out: list[Table] = []
    while todo:
        ready = [
            t
            for t in todo.values()
            if not ((t.parents | extra.get(t.name, frozenset())) - {t.name}) & todo.keys()
        ]
        for t in ready or list(todo.values())[:1]:
            out.append(t)
            del todo[t.name]
    return out

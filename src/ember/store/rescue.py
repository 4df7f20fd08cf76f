"""Rows found on the raw pages of a damaged file, matched to tables by their shape.

SQLite reaches a row only through its table's b-tree; the rows below a damaged interior page,
in WAL frames after a bad checksum, or in a file whose schema page is gone are still on intact
leaf pages (``pages.py`` decodes them). This module decides which of them are rows, and whose
(steps 3 to 5 of ``recover.py``):
- ``rescue_known``: rows an index names but the table scan did not reach, looked for on every
  intact leaf page;
- ``rescue_tail``: rows of the commits after a damaged WAL frame that no copied row has;
- ``by_shape``: with no readable schema, every intact leaf row goes to the table it fits.

Invariants — a rescued row is one the file held, never a guess:
- A row goes to a table only when its record fits that table's shape (``Shape.fits``: column
  count, NULLs, the affinities ember writes). A row the table is not known for (the WAL's
  tail, no schema) goes only to the one table it fits: a row several could hold — the
  schema's own table, migrations, FTS and vector tables competing too — is left out.
- A rowid found in two versions (a stale copy on a freed page) is not guessed at: it stays
  lost. A row already copied is never replaced by a rescued one.
- What cannot be known is said (``RecoveryReport.notes``, ``TableReport.uncounted``): rows
  that lived only on damaged frames, and how many a file without a schema held.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ember.store import pages as pg
from ember.store.driver import Connection
from ember.store.recovered import (
    REEMBED,
    RecoveryReport,
    TableReport,
    all_tables,
    columns,
    insert,
    tables,
)

# -- the damaged file's pages -----------------------------------------------------------------


@dataclass
class Image:
    """The damaged file's pages as SQLite would read them (the main file with the verified
    WAL frames over it), and the WAL's unverifiable tail."""

    page_size: int
    main: bytes
    verified: dict[int, bytes]
    #: every committed version of each page after the break, oldest first
    tail: dict[int, list[bytes]]

    @property
    def count(self) -> int:
        return max([len(self.main) // self.page_size, *self.verified])

    def newest(self, number: int) -> bytes | None:
        """The page as the WAL's tail last wrote it, else as SQLite reads it."""
        versions = self.tail.get(number)
        return versions[-1] if versions else self.page(number)

    def page(self, number: int) -> bytes | None:
        found = self.verified.get(number)
        if found is not None:
            return found
        start = (number - 1) * self.page_size
        if number < 1 or start + self.page_size > len(self.main):
            return None
        return self.main[start : start + self.page_size]


# -- what a table's records look like ---------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    affinity: str
    notnull: bool
    has_default: bool
    rowid_alias: bool
    #: part of the primary key (never NULL in a row ember wrote)
    key: bool = False


@dataclass
class Shape:
    """What a table's records look like on disk (in the damaged file's column order)."""

    table: str
    columns: list[Column]

    def fits(self, values: tuple[pg.Value, ...]) -> bool:
        """Whether ``values`` can be a record of this table: a rowid alias stored as NULL, no
        NULL in a NOT NULL or key column, no number or blob in a TEXT column (TEXT affinity
        turns numbers into text; ember never stores blobs there), no text in an INTEGER or
        REAL column (ember never stores any), and the columns the record lacks (added
        later) have a default."""
        if not 0 < len(values) <= len(self.columns):
            return False
        if not all(_holds(c, v) for c, v in zip(self.columns, values, strict=False)):
            return False
        return all(c.has_default or not c.notnull for c in self.columns[len(values) :])

    def row(self, found: pg.LeafRow, wanted: list[str]) -> tuple[Any, ...]:
        """``found`` as the values of ``rowid`` and ``wanted`` (missing trailing columns are
        left to their defaults by the insert: only columns the record has are returned)."""
        named = {c.name: v for c, v in zip(self.columns, found.values, strict=False)}
        for col in self.columns:
            if col.rowid_alias:
                named[col.name] = found.rowid
        return (found.rowid, *(named[c] for c in wanted if c in named))


def _holds(col: Column, value: pg.Value) -> bool:
    if col.rowid_alias:
        return value is None  # the rowid itself is the value
    if value is None:
        return not (col.notnull or col.key)
    if col.affinity == "TEXT":
        return isinstance(value, str)
    if col.affinity in ("INTEGER", "REAL"):
        return not isinstance(value, str | bytes)
    return True


#: How a row of the schema table itself looks (type, name, tbl_name, rootpage, sql).
_SCHEMA_SHAPE = Shape(
    "sqlite_schema",
    [
        Column("type", "TEXT", True, False, False),
        Column("name", "TEXT", True, False, False),
        Column("tbl_name", "TEXT", True, False, False),
        Column("rootpage", "INTEGER", True, False, False),
        Column("sql", "TEXT", False, False, False),
    ],
)


def _shape(conn: Connection, table: str) -> Shape:
    info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
    pks = [r for r in info if int(r[5])]
    alias = len(pks) == 1 and str(pks[0][2]).upper() == "INTEGER"
    cols = [
        Column(
            name=str(r[1]),
            affinity=_affinity(str(r[2])),
            notnull=bool(r[3]),
            has_default=r[4] is not None,
            rowid_alias=alias and bool(r[5]),
            key=bool(r[5]),
        )
        for r in info
    ]
    return Shape(table, cols)


def _affinity(declared: str) -> str:
    """SQLite's rules for a column's affinity from its declared type."""
    t = declared.upper()
    if "INT" in t:
        return "INTEGER"
    if any(k in t for k in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if "BLOB" in t or not t:
        return "BLOB"
    if any(k in t for k in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


# -- 3. rows an index names, on any intact leaf page ------------------------------------------


def _leaves(image: Image, *, tail: bool = False) -> Iterator[pg.LeafRow]:
    """Every row of every intact table leaf page of the image. ``tail``: of every version of
    each page in the WAL's unverifiable tail, oldest first (a newer version's rows come
    later: they win); its overflow pages may be anywhere. A page that does not decode whole
    is skipped: garbage can look like rows."""
    pages: Iterator[tuple[int, bytes | None]]
    if tail:
        pages = ((n, v) for n in sorted(image.tail) for v in image.tail[n])
        fetch = image.newest
    else:
        pages = ((n, image.page(n)) for n in range(1, image.count + 1))
        fetch = image.page
    for number, page in pages:
        if page is None or pg.page_type(page, number) != pg.TABLE_LEAF:
            continue
        with contextlib.suppress(pg.Malformed):
            yield from pg.leaf_rows(page, number, fetch)


def rescue_known(
    image: Image,
    source: Connection,
    out: Connection,
    report: RecoveryReport,
    copied: dict[str, set[int]],
    missing: dict[str, set[int]],
) -> None:
    """Rows an index names but the table scan did not reach: looked for on every intact leaf
    page (below a damaged interior page, typically). A rowid found in two versions (a stale
    copy on a freed page) is not guessed at: it stays lost."""
    shapes = {t: _shape(source, t) for t in missing}
    found: dict[str, dict[int, set[tuple[pg.Value, ...]]]] = {t: {} for t in missing}
    for leaf in _leaves(image):
        for table, wanted in missing.items():
            if leaf.rowid in wanted and shapes[table].fits(leaf.values):
                found[table].setdefault(leaf.rowid, set()).add(leaf.values)
    for table, wanted in missing.items():
        shape = shapes[table]
        unique = {r: next(iter(vs)) for r, vs in found[table].items() if len(vs) == 1}
        got = _insert_rows(out, table, shape, unique, _common(out, shape))
        entry = report.tables[table]
        entry.copied += got
        entry.rescued += got
        copied[table] |= set(unique)
        entry.lost = len(wanted - set(unique))


def _common(out: Connection, shape: Shape) -> list[str]:
    """The new table's columns the damaged file's table has too."""
    have = {c.name for c in shape.columns}
    return [c for c in columns(out, shape.table) if c in have]


def _insert_rows(
    out: Connection,
    table: str,
    shape: Shape,
    rows: dict[int, tuple[pg.Value, ...]],
    cols: list[str],
) -> int:
    """Insert rows decoded from raw pages, grouped by how many columns their records hold
    (a row written before a column was added has fewer: the rest take their defaults)."""
    by_width: dict[int, list[tuple[int, tuple[pg.Value, ...]]]] = {}
    for rowid, values in sorted(rows.items()):
        by_width.setdefault(len(values), []).append((rowid, values))
    total = 0
    for width, group in by_width.items():
        have = {c.name for c in shape.columns[:width] if not c.rowid_alias}
        have |= {c.name for c in shape.columns if c.rowid_alias}
        wanted = [c for c in cols if c in have]
        decoded = [shape.row(pg.LeafRow(r, v), wanted) for r, v in group]
        total += insert(out, table, ["rowid", *wanted], decoded)
    return total


# -- 4. the WAL's unverifiable tail -----------------------------------------------------------


def rescue_tail(image: Image, out: Connection, report: RecoveryReport, copied: Copied) -> None:
    """Rows on intact leaf pages of commits after a damaged WAL frame, that no copied row
    has. Those commits may be newer than the schema SQLite could read (a migration among
    them), so rows are matched against the new file's tables, whose columns only ever grow:
    each goes to the one table whose records it fits (a row several could hold is left out,
    and said so)."""
    if not image.tail:
        if any("the WAL is damaged" in n for n in report.notes):
            report.tables.setdefault("*", TableReport()).uncounted = True
        return
    found, unsure = _assign(out, _leaves(image, tail=True), copied)
    rescued = 0
    for table, (shape, rows) in found.items():
        got = _insert_rows(out, table, shape, rows, [c.name for c in shape.columns])
        entry = report.tables.setdefault(table, TableReport())
        entry.copied += got
        entry.rescued += got
        copied.setdefault(table, set()).update(rows)
        rescued += got
    report.notes.append(
        f"{rescued} rows were rescued from intact WAL frames after the damage"
        + (f"; {unsure} more fit several tables and were left out" if unsure else "")
        + "; rows that lived only on the damaged frames cannot be counted"
    )
    report.tables.setdefault("*", TableReport()).uncounted = True


Copied = dict[str, set[int]]
Found = dict[str, tuple["Shape", dict[int, tuple[pg.Value, ...]]]]


def _assign(out: Connection, leaves: Iterator[pg.LeafRow], copied: Copied) -> tuple[Found, int]:
    """Each row to the one table of the new file whose records it fits and that has no row
    of its rowid yet (later leaves win: the tail's newest). Rows of tables that are never
    copied (the schema itself, migrations, FTS and vector tables) compete for a match too:
    a row that also fits one of those is not copied. Returns the rows by table and how many
    rows fitted several tables, one of them copied."""
    shapes = [_shape(out, t) for t in tables(out) if t not in REEMBED]
    names = {s.table for s in shapes}
    sinks = [_shape(out, t) for t in all_tables(out) if t not in names]
    sinks.append(_SCHEMA_SHAPE)
    found: Found = {}
    unsure = 0
    for leaf in leaves:
        homes = [s for s in (*shapes, *sinks) if s.fits(leaf.values)]
        if len(homes) > 1:
            unsure += any(h.table in names for h in homes)
            continue
        if not homes or homes[0].table not in names:
            continue
        shape = homes[0]
        if leaf.rowid not in copied.get(shape.table, ()):
            found.setdefault(shape.table, (shape, {}))[1][leaf.rowid] = leaf.values
    return found, unsure


# -- 5. no schema: rows matched to tables by their shape --------------------------------------


def by_shape(image: Image, out: Connection, report: RecoveryReport, why: str) -> None:
    """The schema is gone: every intact leaf row goes to the one table of the new schema
    whose records it fits. Nothing says how many rows there were, nor whether a row on a
    freed page had been deleted."""
    report.notes.append(
        f"{why}: rows were matched to tables by their shape; how many were lost cannot be "
        "counted, and a row deleted before the damage may be back"
    )
    leaves = itertools.chain(_leaves(image), _leaves(image, tail=True))
    found, _ = _assign(out, leaves, {})
    for table in tables(out):
        if table in REEMBED:
            continue
        entry = report.tables[table] = TableReport(uncounted=True)
        if table in found:
            shape, rows = found[table]
            got = _insert_rows(out, table, shape, rows, [c.name for c in shape.columns])
            entry.copied = entry.rescued = got

"""Recovering a damaged database into a new file, keeping the old one (``ember doctor``).

The approach of SQLite's ``.recover``, specialised to ember's schema: build a fresh file from
the schema's migrations, then copy every row that can still be read, and count — truthfully —
the rows that cannot. In order:

1. Work on a copy. The damaged file and its WAL are copied aside (never the ``-shm``: SQLite
   then rebuilds the WAL index and checks every frame's checksum). The damaged file is never
   opened, so nothing — not even the checkpoint a closing connection makes — can change it.
   A header that is not valid (garbage over the first bytes) is replaced on the copy.
2. Copy each table through SQLite. A scan that fails midway is read again by ``rowid`` ranges,
   halving a range that fails until single rows are skipped: one bad page costs the rows on
   it, not the table.
3. Know what was there. Every index of a table holds the ``rowid`` of each of its rows, and
   its pages are not the table's: an index read end to end (or from both ends, up to the
   damage) names the rows that existed. Rows it names that were not copied are looked for on
   the raw pages (``pages.py``): a damaged interior page hides intact leaves below it. What
   is still missing is *lost*, and counted.
4. Rescue what the WAL's checksums no longer vouch for: frames after a damaged one belong to
   commits SQLite's recovery drops; their intact leaf pages give back rows no copied row has.
5. Say what cannot be known: a table whose damaged pages no complete index covers, rows that
   lived only on garbage WAL frames, a schema page that is gone (rows are then matched to
   tables by their shape) — ``TableReport.uncounted`` and ``RecoveryReport.notes``.

Derived data is rebuilt rather than copied: the FTS index from the memories, the vectors by
re-embedding on the next open (a damaged vector index could rank by noise). The damaged file
is renamed aside (``ember.db.damaged-<time>``, with its ``-wal`` and ``-shm``) only once the
new file passed ``PRAGMA integrity_check``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.errors import StorageError
from ember.store import pages as pg
from ember.store.driver import Connection, connect, errors
from ember.store.migrations import Schema, migrate

#: Tables whose content is derived and rebuilt, never copied (virtual tables and their
#: shadow tables; vectors are re-embedded; ``spend_hours`` is summed again by its trigger as
#: the accounting rows go in — copied too, every hour would count twice).
_DERIVED_PREFIXES = ("memory_fts", "memory_vec", "_migrations", "sqlite_", "spend_hours")
_REEMBED = ("memory_vectors",)
_CHUNK = 500
#: Where no count of rows is known, rowid ranges are probed up to this (then given up).
_PROBE_TOP = 100_000


@dataclass
class TableReport:
    copied: int = 0
    lost: int = 0
    error: str | None = None
    #: rows copied from raw pages SQLite could no longer reach (part of ``copied``)
    rescued: int = 0
    #: rows may be lost beyond ``lost``: pages could not be read and no complete index
    #: says which rows they held
    uncounted: bool = False


@dataclass
class RecoveryReport:
    source: Path
    recovered: Path
    kept_as: Path | None = None
    tables: dict[str, TableReport] = field(default_factory=dict)
    #: what was done beyond copying, and what cannot be known (one sentence each)
    notes: list[str] = field(default_factory=list)

    @property
    def copied(self) -> int:
        return sum(t.copied for t in self.tables.values())

    @property
    def lost(self) -> int:
        return sum(t.lost for t in self.tables.values())

    @property
    def uncounted(self) -> list[str]:
        """Tables that may have lost rows beyond ``lost`` (``*``: the file as a whole)."""
        return sorted(name for name, t in self.tables.items() if t.uncounted)

    @property
    def exact(self) -> bool:
        """``copied + lost`` is every row the file held (as far as any copy can tell)."""
        return not self.uncounted

    def to_json(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "recovered": str(self.recovered),
            "kept_as": str(self.kept_as) if self.kept_as else None,
            "copied": self.copied,
            "lost": self.lost,
            "exact": self.exact,
            "uncounted": self.uncounted,
            "notes": self.notes,
            "tables": {k: vars(v) for k, v in sorted(self.tables.items())},
        }


def recover(path: Path, schema: Schema, *, now: float | None = None) -> RecoveryReport:
    """Salvage ``path`` into a new file, swap it in, keep the damaged one beside it."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    target = path.with_name(f"{path.name}.recovered-{stamp}")
    report = salvage(path, target, schema)
    report.kept_as = _swap(path, target, stamp)
    report.recovered = path
    return report


def salvage(src: Path, dst: Path, schema: Schema) -> RecoveryReport:
    """Copy what can be read from ``src`` into a new database at ``dst`` (``src`` untouched)."""
    if dst.exists():
        raise StorageError(f"{dst} already exists; move it away first")
    report = RecoveryReport(src, dst)
    work = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    try:
        image = _snapshot(src, work / "copy.db", report)
        out = connect(dst).conn
        try:
            migrate(out, schema.migrations)
            # Rows are copied table by table, and a row's parent may be among the lost ones:
            # references are checked once at the end, and orphans dropped (``_drop_orphans``).
            out.execute("PRAGMA foreign_keys=OFF")
            _fill(work / "copy.db", image, out, report)
            _drop_orphans(out, report)
            out.execute("PRAGMA foreign_keys=ON")
            _rebuild_derived(out)
            check = out.execute("PRAGMA integrity_check").fetchone()[0]
            if check != "ok":
                raise StorageError(f"the recovered file {dst} failed its integrity check: {check}")
        finally:
            out.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report


# -- 1. the copy ------------------------------------------------------------------------------


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


def _snapshot(src: Path, copy: Path, report: RecoveryReport) -> Image:
    """Copy ``src`` and its WAL to ``copy``, put a valid header on the copy if the original's
    is not, and read the pages."""
    main = src.read_bytes()
    wal_path = Path(str(src) + "-wal")
    wal_bytes = wal_path.read_bytes() if wal_path.is_file() else b""
    wal = pg.read_wal(wal_bytes)
    if wal.damage:
        report.notes.append(f"the WAL is damaged: {wal.damage}")
    size = pg.page_size_of(main[: pg.HEADER_BYTES])
    if size is None and main:
        size = wal.page_size or pg.guess_page_size(main)
        header = pg.fresh_header(size, len(main) // size, wal=bool(wal.page_size))
        main = header + main[pg.HEADER_BYTES :]
        report.notes.append(
            f"the file's header was not valid; the copy was read with a new one (pages of "
            f"{size} bytes)"
        )
    main = _whole_pages(main, size or 4096, report)
    copy.write_bytes(main)
    if wal_bytes:
        Path(str(copy) + "-wal").write_bytes(wal_bytes)
    return Image(size or 4096, main, wal.verified, wal.tail)


def _whole_pages(main: bytes, size: int, report: RecoveryReport) -> bytes:
    """A file cut short (a torn copy, a full disk): padded to whole pages, and its header's
    page count lowered to what is there — SQLite refuses a file shorter than its header says,
    which would hide the pages that are still there."""
    if not main:
        return main
    have = -(-len(main) // size)
    main = main.ljust(have * size, b"\x00")
    declared = int.from_bytes(main[28:32], "big")
    if main[24:28] == main[92:96] and declared > have:
        report.notes.append(
            f"the file ends at page {have} of the {declared} its header counts: the pages "
            "past its end are lost"
        )
        main = main[:28] + have.to_bytes(4, "big") + main[32:]
    return main


# -- 2. and 3. copy each table, know what it held ---------------------------------------------


def _fill(copy: Path, image: Image, out: Connection, report: RecoveryReport) -> None:
    try:
        source = connect(copy, readonly=True).conn
    except errors.Error as exc:
        _by_shape(image, out, report, f"the file cannot be opened ({exc})")
        return
    try:
        try:
            present = _tables(source)
        except errors.Error as exc:  # the schema page itself is unreadable
            _by_shape(image, out, report, f"its schema cannot be read ({exc})")
            return
        copied = _copy_all(image, source, out, report, present)
        _rescue_tail(image, out, report, copied)
    finally:
        source.close()


def _copy_all(
    image: Image, source: Connection, out: Connection, report: RecoveryReport, present: list[str]
) -> dict[str, set[int]]:
    """Copy every table ember knows; returns the rowids copied per table."""
    copied: dict[str, set[int]] = {}
    missing: dict[str, set[int]] = {}
    for table in _tables(out):
        if table not in present or table in _REEMBED:
            continue
        cols = [c for c in _columns(out, table) if c in set(_columns(source, table))]
        if _without_rowid(source, table):
            report.tables[table] = _copy_keyed(source, out, table, cols)
            continue
        known, complete = _index_rowids(source, table)
        entry, rowids, failed = _copy_table(source, out, table, cols, max(known, default=0))
        entry.uncounted = failed and not complete
        report.tables[table] = entry
        copied[table] = rowids
        if known - rowids:
            missing[table] = known - rowids
    if missing:
        _rescue_known(image, source, out, report, copied, missing)
    return copied


def _tables(conn: Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
    return [str(r[0]) for r in rows if not str(r[0]).startswith(_DERIVED_PREFIXES)]


def _all_tables(conn: Connection) -> list[str]:
    """Every table with rows on table b-tree pages (virtual tables have none)."""
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
    )
    return [str(r[0]) for r in rows]


def _columns(conn: Connection, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')]


def _without_rowid(conn: Connection, table: str) -> bool:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name=?", (table,)).fetchone()
    return row is not None and "WITHOUT ROWID" in str(row[0]).upper()


def _copy_table(
    source: Connection, out: Connection, table: str, cols: list[str], known_top: int
) -> tuple[TableReport, set[int], bool]:
    """Copy ``table`` by rowid; returns the report, the rowids copied and whether any read
    failed (then some rows were not reached)."""
    report = TableReport()
    names = ", ".join(f'"{c}"' for c in cols)
    select = f'SELECT rowid, {names} FROM "{table}" NOT INDEXED'
    failed = False
    try:
        rows = source.execute(select).fetchall()
    except errors.Error as exc:
        report.error = str(exc)
        failed = True
        top = max(known_top, _max_rowid(source, table))
        rows = list(_by_ranges(source, select, top))
    report.copied = _insert(out, table, ["rowid", *cols], [tuple(r) for r in rows])
    return report, {int(r[0]) for r in rows}, failed


def _copy_keyed(source: Connection, out: Connection, table: str, cols: list[str]) -> TableReport:
    """A ``WITHOUT ROWID`` table: copied whole when it reads, else nothing can be counted."""
    report = TableReport()
    names = ", ".join(f'"{c}"' for c in cols)
    try:
        rows = source.execute(f'SELECT {names} FROM "{table}"').fetchall()
    except errors.Error as exc:
        report.error = str(exc)
        report.uncounted = True
        rows = []
    report.copied = _insert(out, table, cols, [tuple(r) for r in rows])
    return report


def _insert(out: Connection, table: str, cols: list[str], rows: list[tuple[Any, ...]]) -> int:
    """Insert ``rows``; returns how many went in (a duplicate key is not a copied row). The
    statement's own row count, not the connection's total: that one also counts the rows a
    trigger wrote (``spend_hours``), and reported two copied rows for each one."""
    if not rows:
        return 0
    names = ", ".join(c if c == "rowid" else f'"{c}"' for c in cols)
    marks = ", ".join("?" * len(cols))
    out.execute("BEGIN")
    try:
        cur = out.executemany(f'INSERT OR IGNORE INTO "{table}" ({names}) VALUES ({marks})', rows)
        out.execute("COMMIT")
    except BaseException:
        out.execute("ROLLBACK")
        raise
    return int(cur.rowcount)


def _by_ranges(source: Connection, select: str, top: int) -> Iterator[Any]:
    """Rows by ``rowid`` ranges, skipping the ranges that cannot be read (bisected down to
    single rows)."""
    stack = [(lo, min(lo + _CHUNK, top + 1)) for lo in range(0, top + 1, _CHUNK)][::-1]
    while stack:
        lo, hi = stack.pop()
        try:
            rows = source.execute(f"{select} WHERE rowid >= ? AND rowid < ?", (lo, hi)).fetchall()
        except errors.Error:
            if hi - lo > 1:
                mid = (lo + hi) // 2
                stack.extend([(mid, hi), (lo, mid)])
            continue
        yield from rows


def _max_rowid(source: Connection, table: str) -> int:
    for sql in (
        f'SELECT max(rowid) FROM "{table}"',
        f'SELECT max(rowid) FROM "{table}" NOT INDEXED',
    ):
        with contextlib.suppress(errors.Error):
            value = source.execute(sql).fetchone()[0]
            return int(value or 0)
    return _PROBE_TOP  # unknown: probe a generous range


def _index_rowids(source: Connection, table: str) -> tuple[set[int], bool]:
    """The rowids the table's indexes hold, and whether one index was read end to end (then
    they are every row the table had). An index read that fails is read again from its other
    end, up to the damage."""
    found: set[int] = set()
    for name, order in _indexes(source, table):
        forward, whole = _scan(source, f'SELECT rowid FROM "{table}" INDEXED BY "{name}"')
        found |= forward
        if whole:
            return found, True
        backward, _ = _scan(
            source, f'SELECT rowid FROM "{table}" INDEXED BY "{name}" ORDER BY {order}'
        )
        found |= backward
    return found, False


def _indexes(source: Connection, table: str) -> list[tuple[str, str]]:
    """Each full index of ``table`` (not partial, no expressions) with the ``ORDER BY`` that
    reads it backwards."""
    out = []
    try:
        listed = source.execute(f'PRAGMA index_list("{table}")').fetchall()
    except errors.Error:
        return []
    for row in listed:
        name, partial = str(row[1]), int(row[4])
        if partial:
            continue
        keys = [r for r in source.execute(f'PRAGMA index_xinfo("{name}")') if int(r[5])]
        if not keys or any(r[2] is None for r in keys):
            continue  # an expression: cannot be ordered by a column
        order = ", ".join(f'"{r[2]}" COLLATE {r[4]} {"ASC" if int(r[3]) else "DESC"}' for r in keys)
        out.append((name, order))
    return out


def _scan(source: Connection, sql: str) -> tuple[set[int], bool]:
    """The rowids ``sql`` yields until it fails; True when it read to the end."""
    found: set[int] = set()
    try:
        cursor = source.execute(sql)
        while batch := cursor.fetchmany(_CHUNK):
            found.update(int(r[0]) for r in batch)
    except errors.Error:
        return found, False
    return found, True


# -- rows found on raw pages ------------------------------------------------------------------


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


def _rescue_known(
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
    return [c for c in _columns(out, shape.table) if c in have]


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
        total += _insert(out, table, ["rowid", *wanted], decoded)
    return total


# -- 4. the WAL's unverifiable tail -----------------------------------------------------------


def _rescue_tail(image: Image, out: Connection, report: RecoveryReport, copied: Copied) -> None:
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
    shapes = [_shape(out, t) for t in _tables(out) if t not in _REEMBED]
    names = {s.table for s in shapes}
    sinks = [_shape(out, t) for t in _all_tables(out) if t not in names]
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


def _by_shape(image: Image, out: Connection, report: RecoveryReport, why: str) -> None:
    """The schema is gone: every intact leaf row goes to the one table of the new schema
    whose records it fits. Nothing says how many rows there were, nor whether a row on a
    freed page had been deleted."""
    report.notes.append(
        f"{why}: rows were matched to tables by their shape; how many were lost cannot be "
        "counted, and a row deleted before the damage may be back"
    )
    leaves = itertools.chain(_leaves(image), _leaves(image, tail=True))
    found, _ = _assign(out, leaves, {})
    for table in _tables(out):
        if table in _REEMBED:
            continue
        entry = report.tables[table] = TableReport(uncounted=True)
        if table in found:
            shape, rows = found[table]
            got = _insert_rows(out, table, shape, rows, [c.name for c in shape.columns])
            entry.copied = entry.rescued = got


# -- after the copy ---------------------------------------------------------------------------


def _drop_orphans(out: Connection, report: RecoveryReport) -> None:
    """Rows whose parent was lost (evidence of a lost memory...) go too, counted as lost."""
    orphans = sorted({(str(r[0]), int(r[1])) for r in out.execute("PRAGMA foreign_key_check")})
    if not orphans:
        return
    out.execute("BEGIN")
    for table, rowid in orphans:  # one row may break several references: counted once
        out.execute(f'DELETE FROM "{table}" WHERE rowid=?', (rowid,))
        entry = report.tables.setdefault(str(table), TableReport())
        entry.copied -= 1
        entry.lost += 1
    out.execute("COMMIT")


def _rebuild_derived(out: Connection) -> None:
    tables = set(_tables(out)) | {"memory_fts"}
    if "memories" not in tables:
        return
    out.execute("BEGIN")
    out.execute(
        "INSERT INTO memory_fts (rowid, content) "
        "SELECT seq, content FROM memories WHERE valid_until IS NULL"
    )
    # Vectors are re-embedded on the next open: no row claims a vector it does not have.
    out.execute("UPDATE memories SET embedder=NULL")
    out.execute("DELETE FROM memory_meta WHERE key='embedder'")
    out.execute("COMMIT")


def _swap(path: Path, recovered: Path, stamp: str) -> Path:
    kept = path.with_name(f"{path.name}.damaged-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        old = Path(str(path) + suffix)
        if old.exists():
            os.replace(old, Path(str(kept) + suffix))
    os.replace(recovered, path)
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(recovered) + suffix)
    return kept

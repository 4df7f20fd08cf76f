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
   the raw pages (``rescue.py``): a damaged interior page hides intact leaves below it. What
   is still missing is *lost*, and counted.
4. Rescue what the WAL's checksums no longer vouch for: frames after a damaged one belong to
   commits SQLite's recovery drops; their intact leaf pages give back rows no copied row has
   (``rescue.py``).
5. Say what cannot be known: a table whose damaged pages no complete index covers, rows that
   lived only on garbage WAL frames, a schema page that is gone (rows are then matched to
   tables by their shape) — ``TableReport.uncounted`` and ``RecoveryReport.notes``.

This module runs the steps and does what goes through SQLite; ``rescue.py`` finds rows on raw
pages, and every row of either goes into the new file through ``recovered.py`` (its tables,
its one counting insert, the report).

Derived data is rebuilt rather than copied: the FTS index from the memories, the vectors by
re-embedding on the next open (a damaged vector index could rank by noise). The damaged file
is renamed aside (``ember.db.damaged-<time>``, with its ``-wal`` and ``-shm``) only once the
new file passed ``PRAGMA integrity_check``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ember.errors import StorageError
from ember.store import pages as pg
from ember.store.driver import Connection, connect, errors
from ember.store.migrations import Schema, migrate
from ember.store.recovered import REEMBED, RecoveryReport, TableReport, columns, insert, tables
from ember.store.rescue import (
    Column,
    Copied,
    Found,
    Image,
    Shape,
    by_shape,
    rescue_known,
    rescue_tail,
)

# What callers import from here; the report is defined in ``recovered``, the rescue's types in
# ``rescue``.
__all__ = [
    "Column",
    "Copied",
    "Found",
    "Image",
    "RecoveryReport",
    "Shape",
    "TableReport",
    "recover",
    "salvage",
]

_CHUNK = 500
#: Where no count of rows is known, rowid ranges are probed up to this (then given up).
_PROBE_TOP = 100_000


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
    """A file cut short (a torn copy, a full disk): cut to whole pages, and its header's page
    count lowered to what is there — SQLite refuses a file shorter than its header says, which
    would hide the pages that are still there.

    A page cut mid-way is dropped, not padded: a b-tree page keeps its cells at its end, so
    the part that survived holds the cell pointers and the part that is gone holds what they
    point at. Padded with zeros it read as rows of zeros and truncated text, copied as if they
    were the user's (only a first page cut short is padded: without it there is no file)."""
    if not main:
        return main
    have = max(len(main) // size, 1)
    if len(main) % size and have * size < len(main):
        report.notes.append(
            f"page {have + 1} was cut mid-way: what it held is lost (not guessed from its part)"
        )
    main = main[: have * size].ljust(have * size, b"\x00")
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
        by_shape(image, out, report, f"the file cannot be opened ({exc})")
        return
    try:
        try:
            present = tables(source)
        except errors.Error as exc:  # the schema page itself is unreadable
            by_shape(image, out, report, f"its schema cannot be read ({exc})")
            return
        copied = _copy_all(image, source, out, report, present)
        rescue_tail(image, out, report, copied)
    finally:
        source.close()


def _copy_all(
    image: Image, source: Connection, out: Connection, report: RecoveryReport, present: list[str]
) -> dict[str, set[int]]:
    """Copy every table ember knows; returns the rowids copied per table."""
    copied: dict[str, set[int]] = {}
    missing: dict[str, set[int]] = {}
    for table in tables(out):
        if table not in present or table in REEMBED:
            continue
        cols = [c for c in columns(out, table) if c in set(columns(source, table))]
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
        rescue_known(image, source, out, report, copied, missing)
    return copied


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
    report.copied = insert(out, table, ["rowid", *cols], [tuple(r) for r in rows])
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
    report.copied = insert(out, table, cols, [tuple(r) for r in rows])
    return report


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
    present = set(tables(out)) | {"memory_fts"}
    if "memories" not in present:
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

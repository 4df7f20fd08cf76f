"""Recovering a damaged database into a new file, keeping the old one (``ember doctor``).

The approach of SQLite's ``.recover``, specialised to ember's schema: build a fresh file
from the schema's migrations, then copy every row that can still be read from each table of
the damaged one. A table whose scan fails midway is read again by ``rowid`` ranges, halving a
range that fails until single rows are skipped — so one bad page costs the rows on it, not
the table. Derived data is rebuilt rather than copied: the FTS index from the memories, the
vectors by re-embedding on the next open (a damaged vector index could rank by noise).

The damaged file is never modified: it is renamed aside (``ember.db.damaged-<time>``, with
its ``-wal`` and ``-shm``) only once the new file passed ``PRAGMA integrity_check``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.errors import StorageError
from ember.store.driver import Connection, connect, errors
from ember.store.migrations import Schema, migrate

#: Tables whose content is derived and rebuilt, never copied (virtual tables and their
#: shadow tables; vectors are re-embedded).
_DERIVED_PREFIXES = ("memory_fts", "memory_vec", "_migrations", "sqlite_")
_REEMBED = ("memory_vectors",)
_CHUNK = 500


@dataclass
class TableReport:
    copied: int = 0
    lost: int = 0
    error: str | None = None


@dataclass
class RecoveryReport:
    source: Path
    recovered: Path
    kept_as: Path | None = None
    tables: dict[str, TableReport] = field(default_factory=dict)

    @property
    def copied(self) -> int:
        return sum(t.copied for t in self.tables.values())

    @property
    def lost(self) -> int:
        return sum(t.lost for t in self.tables.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "recovered": str(self.recovered),
            "kept_as": str(self.kept_as) if self.kept_as else None,
            "copied": self.copied,
            "lost": self.lost,
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
    out = connect(dst).conn
    try:
        migrate(out, schema.migrations)
        # Rows are copied table by table, and a row's parent may be among the lost ones:
        # references are checked once at the end, and orphans dropped (``_drop_orphans``).
        out.execute("PRAGMA foreign_keys=OFF")
        try:
            source = connect(src, readonly=True).conn
        except errors.Error as exc:
            report.tables["*"] = TableReport(error=f"cannot open: {exc}")
            return report
        try:
            _copy_all(source, out, report)
        finally:
            source.close()
        _drop_orphans(out, report)
        out.execute("PRAGMA foreign_keys=ON")
        _rebuild_derived(out)
        check = out.execute("PRAGMA integrity_check").fetchone()[0]
        if check != "ok":
            raise StorageError(f"the recovered file {dst} failed its integrity check: {check}")
    finally:
        out.close()
    return report


def _copy_all(source: Connection, out: Connection, report: RecoveryReport) -> None:
    wanted = _tables(out)
    try:
        present = _tables(source)
    except errors.Error as exc:  # the schema page itself is unreadable
        report.tables["*"] = TableReport(error=f"schema unreadable: {exc}")
        return
    for table in wanted:
        if table not in present or table in _REEMBED:
            continue
        cols = [c for c in _columns(out, table) if c in set(_columns(source, table))]
        report.tables[table] = _copy_table(source, out, table, cols)


def _tables(conn: Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
    return [str(r[0]) for r in rows if not str(r[0]).startswith(_DERIVED_PREFIXES)]


def _columns(conn: Connection, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')]


def _copy_table(source: Connection, out: Connection, table: str, cols: list[str]) -> TableReport:
    report = TableReport()
    names = ", ".join(f'"{c}"' for c in cols)
    select = f'SELECT rowid, {names} FROM "{table}" NOT INDEXED'
    marks = ", ".join("?" * (len(cols) + 1))
    insert = f'INSERT OR IGNORE INTO "{table}" (rowid, {names}) VALUES ({marks})'
    out.execute("BEGIN")
    try:
        try:
            rows = source.execute(select).fetchall()
        except errors.Error as exc:
            report.error = str(exc)
            rows = list(_by_ranges(source, select, table, report))
        out.executemany(insert, [tuple(r) for r in rows])
        report.copied = len(rows)
        out.execute("COMMIT")
    except BaseException:
        out.execute("ROLLBACK")
        raise
    return report


def _by_ranges(source: Connection, select: str, table: str, report: TableReport) -> Iterator[Any]:
    """Rows by ``rowid`` ranges, skipping the ranges that cannot be read (bisected down to
    single rows, each counted as lost)."""
    top = _max_rowid(source, table)
    stack = [(lo, min(lo + _CHUNK, top + 1)) for lo in range(0, top + 1, _CHUNK)][::-1]
    while stack:
        lo, hi = stack.pop()
        try:
            rows = source.execute(f"{select} WHERE rowid >= ? AND rowid < ?", (lo, hi)).fetchall()
        except errors.Error:
            if hi - lo <= 1:
                report.lost += 1
                continue
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
    return 100_000  # unknown: probe a generous range


def _drop_orphans(out: Connection, report: RecoveryReport) -> None:
    """Rows whose parent was lost (evidence of a lost memory...) go too, counted as lost."""
    orphans = out.execute("PRAGMA foreign_key_check").fetchall()
    if not orphans:
        return
    out.execute("BEGIN")
    for table, rowid, _parent, _fk in orphans:
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

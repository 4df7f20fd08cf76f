"""``copy_store``: every database of one end into the other, counted and verified.

For each database (project, global store, stats) of the source, in one transaction of the
target's owner (``Database``/``PgDatabase``, which migrates it to the full current schema on
open): the tables both sides have, parents first (and the tables a watermark points into
before it: ``policy.after``), batch by batch (``load``), the numbers the store hands out given
anew where the target already uses them (``renumber``); then the features' indexes rebuilt
from the copied rows (``Feature.rebuild``); then identity sequences moved past the copied
values. One transaction per database: a failure (a lost server, a full
disk) rolls that database back whole, the report says which, and running the copy again
finishes it (rows already there are counted, never written twice).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ember.store.copy import catalog, policy, rehearsal
from ember.store.copy.catalog import Table, ident
from ember.store.copy.ends import (
    CopyError,
    End,
    Unit,
    check_target_home,
    same,
    target_schema,
)
from ember.store.copy.load import Loader, source_count, source_rows
from ember.store.copy.renumber import Maps
from ember.store.copy.report import CopyReport, TableReport, UnitReport
from ember.store.copy.source import Source, unreachable
from ember.store.pg.catalog import COMMENT
from ember.store.pg.connection import Dialect

if TYPE_CHECKING:
    from ember.features import Feature

#: (database, table, rows done, rows in all): called as batches land.
Progress = Callable[[str, str, int, int], None]


def copy_store(
    src: End,
    dst: End,
    progress: Progress | None = None,
    *,
    features: Sequence[Feature],
    dry_run: bool = False,
) -> CopyReport:
    """Copy every database of ``src`` into ``dst``. ``CopyError`` for ends that cannot be
    used (the same end twice, not an ember home, a server that cannot be reached); a
    database that fails is reported (``UnitReport.error``) and the others still copied.
    ``features``: the registered ones (``ember.compose.Spec.features``), whose derived
    tables are rebuilt rather than copied and who are named as a table's owner.
    ``dry_run``: the same work, counted, then rolled back (``rehearsal``)."""
    if same(src, dst):
        raise CopyError(f"--from and --to are the same store ({src}): nothing to copy")
    if dst.home is not None:
        check_target_home(dst.home)
    started = time.monotonic()
    report = CopyReport(str(src), str(dst), dry_run=dry_run)
    with Source(src) as source:
        units = source.units()
        if not units:
            raise CopyError(
                f"{src} holds no ember database (no project, global store or stats): check "
                "the path or the URL's database"
            )
        if dst.url is not None:
            _probe(dst.url)
        for unit in units:
            report.units.append(_copy_unit(source, unit, dst, progress, features, dry_run))
    report.seconds = time.monotonic() - started
    return report


def _probe(url: str) -> None:
    """One connection to the target server before anything is written: a server that cannot
    be reached is one clear error, not one failed database after another."""
    import psycopg

    from ember.store.pg.pool import bounded

    try:
        psycopg.connect(bounded(url)).close()
    except psycopg.Error as exc:
        raise unreachable(url, exc) from None


def _copy_unit(
    source: Source,
    unit: Unit,
    dst: End,
    progress: Progress | None,
    features: Sequence[Feature],
    dry_run: bool,
) -> UnitReport:
    target = target_schema(unit) if dst.url is not None else str(dst.home) + "/" + str(unit.rel)
    out = UnitReport(unit.name, unit.kind, str(unit.schema or unit.rel), target)
    started = time.monotonic()
    try:
        with (
            rehearsal.target(unit, dst, dry_run) as (db, schema),
            source.snapshot(unit) as (src_conn, src_schema),
        ):

            def job(conn: Any) -> tuple[list[TableReport], dict[str, int]]:
                copier = _Copier(
                    source.dialect, src_conn, src_schema, unit, progress, schema, features
                )
                done = copier.run(conn, dst.url is not None, dry_run)
                if dry_run:
                    raise rehearsal.Rehearsed(done)
                return done

            out.tables, out.rebuilt = rehearsal.written(db, job)
    except CopyError:
        raise
    except Exception as exc:
        out.error = f"{type(exc).__name__}: {exc}"
    out.seconds = time.monotonic() - started
    return out


class _Copier:
    """One database's copy, run as one write job of the target (its transaction)."""

    def __init__(
        self,
        dialect: Dialect,
        src: Any,
        src_schema: str | None,
        unit: Unit,
        progress: Progress | None,
        schema: str | None,
        features: Sequence[Feature],
    ) -> None:
        """``schema``: the target's schema (PostgreSQL), else None."""
        self.src, self.src_dialect, self.src_schema = src, dialect, src_schema
        self.unit, self.progress, self.schema = unit, progress, schema
        self.derived = dict(policy.DERIVED)
        for f in features:
            self.derived.update(f.derived())
        self.rebuilds = [f.rebuild() for f in features if f.rebuild is not None]
        self.owners = tuple(
            (f.name, f.postgres, (*f.project_migrations(), *f.stats_migrations())) for f in features
        )

    def run(
        self, conn: Any, postgres: bool, dry_run: bool = False
    ) -> tuple[list[TableReport], dict[str, int]]:
        raw = conn.raw if postgres else conn
        dialect: Dialect = "postgres" if postgres else "sqlite"
        if postgres:
            raw.execute("SET LOCAL statement_timeout = 0")  # an index build may take a while
            self._name_schema(raw)
        mine = catalog.tables(raw, dialect, self.schema)
        theirs = catalog.tables(self.src, self.src_dialect, self.src_schema)
        reports = self._skipped(mine, theirs)
        both = [mine[n] for n in mine.keys() & theirs.keys() if policy.copied(n)]
        both = [t for t in both if t.name not in self.derived]
        maps = Maps(raw.execute, dialect)
        for table in catalog.ordered(both, policy.after()):
            reports.append(self._table(raw, dialect, table, theirs[table.name], maps, dry_run))
        maps.drop()
        copied = {r.table: r.copied for r in reports}
        rebuilt: dict[str, int] = {}
        for rebuild in self.rebuilds:
            rebuilt.update(rebuild(conn, copied))
        made = catalog.tables(raw, dialect, self.schema)
        said = {r.table for r in reports}
        reports += [
            TableReport(n, skipped=self.derived[n])
            for n in made
            if n in self.derived and n not in said
        ]
        order = {r.table: i for i, r in enumerate(reports)}
        return sorted(reports, key=lambda r: (r.skipped is not None, order[r.table])), rebuilt

    def _skipped(self, mine: dict[str, Table], theirs: dict[str, Table]) -> list[TableReport]:
        out: list[TableReport] = []
        for name in sorted(mine.keys() | theirs.keys()):
            if name in policy.BOOKKEEPING:
                continue
            if name in self.derived:
                out.append(TableReport(name, skipped=self.derived[name]))
            elif name not in mine:
                why = policy.owner(name, self.owners)
                out.append(TableReport(name, skipped=f"not in the target: {why}"))
            elif name not in theirs:
                why = policy.owner(name, self.owners)
                out.append(TableReport(name, skipped=f"not in the source: {why}"))
        return out

    def _name_schema(self, raw: Any) -> None:
        """Record the project's folder on its schema (``pg.catalog.project_folder`` reads it)."""
        if self.unit.kind == "project":
            assert self.schema is not None
            text = (COMMENT + self.unit.rel.parent.name).replace("'", "''")
            raw.execute(f"COMMENT ON SCHEMA {ident(self.schema)} IS '{text}'")

    def _table(
        self, raw: Any, dialect: Dialect, table: Table, theirs: Table, maps: Maps, dry_run: bool
    ) -> TableReport:
        owned = policy.OWNED_ROWS.get(table.name)
        columns = [c for c in table.columns if c in theirs.columns]
        out = TableReport(table.name)
        out.unmatched_columns = [c for c in theirs.columns if c not in table.columns]
        out.source = source_count(self.src, self.src_dialect, theirs, owned, self.src_schema)
        loader = Loader(raw, dialect, table, columns, maps)
        for batch in source_rows(
            self.src, self.src_dialect, theirs, columns, owned, self.src_schema
        ):
            loader.add(batch)
            if self.progress is not None:
                done = loader.counts.copied + loader.counts.already + loader.counts.conflicts
                self.progress(self.unit.name, table.name, done, out.source)
        loader.close()
        counts = loader.counts
        out.copied, out.already, out.conflicts = counts.copied, counts.already, counts.conflicts
        out.kept, out.conflict_keys = counts.kept, counts.samples
        if dialect == "postgres" and counts.copied and not dry_run:
            _move_identity(raw, table)
        row = raw.execute(f"SELECT count(*) FROM {ident(table.name)}").fetchone()
        out.target_after = int(row[0])
        return out


def _move_identity(raw: Any, table: Table) -> None:
    """Set each identity sequence of ``table`` past the largest value now stored (never back:
    a value another writer drew meanwhile stays drawn)."""
    for column in table.identity:
        row = raw.execute(
            "SELECT pg_get_serial_sequence(%s, %s)", (ident(table.name), column)
        ).fetchone()
        if row is None or row[0] is None:
            continue
        seq = str(row[0])
        raw.execute(
            f"SELECT setval(%s, GREATEST((SELECT max({ident(column)}) FROM {ident(table.name)}), "
            f"(SELECT last_value FROM {seq})))",
            (seq,),
        )

"""``ember store prune``: every database of a store pruned (``prune.prune_database``), counted.

The databases are the store's own list — each project, the global store and stats of an ember
home, or each ember schema of a PostgreSQL store (``copy.ends``) — each pruned in one write
job of its owner (its transaction, under its write lock). A dry run does the same deletes and
rolls them back (``copy.rehearsal``): its counts are what a real run deletes.

Invariants, and what each prevents:

- A prune creates nothing: only databases that exist are opened (a home's files, a server's
  migrated schemas), so a typo'd path or an empty server is said, not filled.
- One database that fails is reported and the others are still pruned.
- The store is named as ember names it elsewhere (a file; ``schema on user@host/db``), never
  with a password.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.store.copy.ends import Unit, home_units, server_units
from ember.store.copy.rehearsal import Rehearsed, written
from ember.store.database import Database
from ember.store.prune import DAY, cutoff_for, prune_database
from ember.store.schema import PROJECT, STATS, for_postgres


@dataclass
class Pruned:
    database: str
    where: str
    rows: dict[str, int] = field(default_factory=dict)
    error: str | None = None


@dataclass
class PruneReport:
    store: str
    days: float
    cutoff: float
    dry_run: bool = False
    databases: list[Pruned] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(d.error is None for d in self.databases)

    @property
    def total(self) -> int:
        return sum(sum(d.rows.values()) for d in self.databases)

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "older_than_days": self.days,
            "cutoff": self.cutoff,
            "dry_run": self.dry_run,
            "ok": self.ok,
            "rows": self.total,
            "databases": [vars(d) for d in self.databases],
        }

    def lines(self) -> list[str]:
        when = time.strftime("%Y-%m-%d %H:00 UTC", time.gmtime(self.cutoff))
        verb = "would delete" if self.dry_run else "deleted"
        out = [f"{self.store}: rows from before {when} ({self.days:g} days)"]
        for d in self.databases:
            if d.error:
                out.append(f"  {d.database}: FAILED: {d.error}")
                continue
            parts = ", ".join(f"{n} {t}" for t, n in sorted(d.rows.items()) if n)
            out.append(f"  {d.database}: {verb} {parts or 'nothing'}")
        tail = " (dry run: nothing was deleted)" if self.dry_run else ""
        out.append(f"{self.total} rows {verb}; memories and their evidence are kept{tail}")
        return out


def prune_store(
    home: Path, url: str | None, days: float, *, dry_run: bool = False, now: float | None = None
) -> PruneReport:
    """Prune every database of the store (``url``'s server, else ``home``'s files)."""
    from ember.store.pg.url import redacted

    cutoff = cutoff_for(time.time() if now is None else now, days)
    report = PruneReport(redacted(url) if url else str(home), days, cutoff, dry_run)
    for unit in units(home, url):
        db = owner(home, url, unit)
        found = Pruned(unit.name, db.where)
        try:
            found.rows = prune_one(db, cutoff, dry_run)
        except Exception as exc:
            found.error = f"{type(exc).__name__}: {exc}"
        finally:
            db.close()
        report.databases.append(found)
    return report


def prune_one(db: Database, cutoff: float, dry_run: bool = False) -> dict[str, int]:
    """One database pruned in one write job (rolled back after counting on a dry run)."""

    def job(conn: Any) -> dict[str, int]:
        done = prune_database(conn, cutoff)
        if dry_run:
            raise Rehearsed(done)
        return done

    result: dict[str, int] = written(db, job)
    return result


def units(home: Path, url: str | None) -> list[Unit]:
    """The databases the store holds (none created)."""
    if url is None:
        return home_units(home) if home.exists() else []
    import psycopg

    from ember.store.pg.pool import bounded

    with psycopg.connect(bounded(url)) as conn:
        return server_units(conn)


def owner(home: Path, url: str | None, unit: Unit) -> Database:
    """A short-lived owner of ``unit`` (the proxy uses its own: ``retention``)."""
    schema = STATS if unit.kind == "stats" else PROJECT
    if url is None:
        return Database(home / unit.rel, schema, log_failures=False)
    from ember.store.pg.database import PgDatabase

    assert unit.schema is not None
    return PgDatabase(
        home / unit.rel,
        for_postgres(schema),
        url=url,
        schema_name=unit.schema,
        log_failures=False,
    )


__all__ = ["DAY", "PruneReport", "Pruned", "owner", "prune_one", "prune_store", "units"]

"""The recovered file's side of ``ember doctor --recover``: where rows go, and how they count.

Both ways a recovery finds rows — through SQLite (``recover.py``) and on raw pages
(``rescue.py``) — put them into the new file through these, so the counts mean the same
whichever way found a row:
- ``tables``: the tables whose rows are copied, less ``REEMBED`` (vectors are re-embedded on
  the next open). Derived content is rebuilt, never copied (``_DERIVED_PREFIXES``): a damaged
  index could rank by noise, and a copied sum would count twice what its trigger sums again.
- ``insert``: the one insert, which counts only the rows that went in — a duplicate key is not
  a copied row, and a row a trigger wrote is not one either.
- ``RecoveryReport``: ``copied`` and ``lost`` per table; ``exact`` when their sum is every row
  the file held as far as any copy can tell, else ``uncounted`` names the tables (``*``: the
  file) that may have lost more, and ``notes`` says why. Never a count that claims more than
  is known.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.store.driver import Connection

#: Tables whose content is derived and rebuilt, never copied (virtual tables and their
#: shadow tables; vectors are re-embedded; ``spend_hours`` is summed again by its trigger as
#: the accounting rows go in — copied too, every hour would count twice).
_DERIVED_PREFIXES = ("memory_fts", "memory_vec", "_migrations", "sqlite_", "spend_hours")
REEMBED = ("memory_vectors",)


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


def tables(conn: Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
    return [str(r[0]) for r in rows if not str(r[0]).startswith(_DERIVED_PREFIXES)]


def all_tables(conn: Connection) -> list[str]:
    """Every table with rows on table b-tree pages (virtual tables have none)."""
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
    )
    return [str(r[0]) for r in rows]


def columns(conn: Connection, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')]


def insert(out: Connection, table: str, cols: list[str], rows: list[tuple[Any, ...]]) -> int:
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

"""What ``ember store copy`` did, per database and per table: for people and for scripts.

Every number is counted, never inferred: rows in the source (its snapshot), copied now,
already there (equal under the same key, or found by its natural key in a table the store
numbers itself), kept (the target's own row under that key, in a table whose rows the target
keeps: ``policy.TARGET_KEEPS``), in conflict (another row under the key: kept, not
overwritten, or a row whose parent is not in the target), and in the target after the copy
(counted in the copy's own transaction). A table is ``verified`` when nothing conflicted and
every source row is accounted for; a copy whose every table is verified exits 0. A dry run's
report has the same numbers, for a copy that was rolled back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TableReport:
    table: str
    source: int = 0
    copied: int = 0
    already: int = 0
    conflicts: int = 0
    kept: int = 0
    target_after: int = 0
    #: keys of a few conflicting rows
    conflict_keys: list[list[Any]] = field(default_factory=list)
    #: why the table was not copied (only one side has it, or it is rebuilt), else None
    skipped: str | None = None
    #: columns of the source's table the target's lacks (a source of a newer ember): their
    #: values were not copied, so the table is not verified
    unmatched_columns: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        if self.skipped is not None:
            return True
        return (
            self.conflicts == 0
            and self.copied + self.already + self.kept == self.source
            and self.target_after >= self.copied
        )


@dataclass
class UnitReport:
    database: str
    kind: str
    source: str
    target: str
    tables: list[TableReport] = field(default_factory=list)
    #: index entries added from the copied rows, by index
    rebuilt: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0

    @property
    def copied(self) -> int:
        return sum(t.copied for t in self.tables)

    @property
    def ok(self) -> bool:
        return self.error is None and all(t.verified for t in self.tables)


@dataclass
class CopyReport:
    source: str
    target: str
    units: list[UnitReport] = field(default_factory=list)
    seconds: float = 0.0
    #: counted, then rolled back: nothing was written
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return all(u.ok for u in self.units)

    @property
    def copied(self) -> int:
        return sum(u.copied for u in self.units)

    def to_json(self) -> dict[str, Any]:
        units = []
        for u in self.units:
            d = asdict(u)
            d["ok"] = u.ok
            d["copied"] = u.copied
            for t, td in zip(u.tables, d["tables"], strict=True):
                td["verified"] = t.verified
            units.append(d)
        return {
            "source": self.source,
            "target": self.target,
            "ok": self.ok,
            "dry_run": self.dry_run,
            "copied": self.copied,
            "seconds": round(self.seconds, 3),
            "databases": units,
        }

    def lines(self) -> list[str]:
        """The report as text: one block per database, one line per table."""
        note = " (dry run: nothing written)" if self.dry_run else ""
        out = [f"{self.source} -> {self.target}{note}"]
        copied = "would copy" if self.dry_run else "copied"
        for u in self.units:
            state = "ok" if u.ok else ("FAILED" if u.error else "CONFLICTS")
            out.append(f"\n{u.database} ({u.kind}) {state}, {u.seconds:.1f}s")
            if u.error:
                out.append(f"  error: {u.error}")
            for t in u.tables:
                if t.skipped is not None:
                    out.append(f"  {t.table:<28} skipped: {t.skipped}")
                    continue
                line = (
                    f"  {t.table:<28} source {t.source:>8}  {copied} {t.copied:>8}  "
                    f"already {t.already:>8}  target {t.target_after:>8}"
                )
                if t.kept:
                    line += f"  kept the target's {t.kept}"
                if t.conflicts:
                    line += f"  CONFLICTS {t.conflicts} (keys {t.conflict_keys})"
                if t.unmatched_columns:
                    missing = ", ".join(t.unmatched_columns)
                    line += f"  NOT COPIED: the target has no column {missing}"
                out.append(line)
            for name, n in u.rebuilt.items():
                out.append(f"  {name:<28} rebuilt: {n} entries added")
        total = self.copied
        if self.dry_run:
            out.append(
                f"\ndry run: {total} rows would be copied ({self.seconds:.1f}s); nothing was "
                "written, run it again without --dry-run to copy them"
                if total
                else f"\ndry run: nothing new to copy, every row is already there "
                f"({self.seconds:.1f}s)"
            )
            return out
        out.append(
            f"\n{total} rows copied in {self.seconds:.1f}s"
            if total
            else f"\nnothing new to copy: every row was already there ({self.seconds:.1f}s)"
        )
        return out

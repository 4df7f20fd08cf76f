"""What proxies reported about each database, for whoever looks next: ``storage-problems.json``.

``ember stats`` and ``ember doctor`` read it; a proxy writes it when a database changes health
(``registry.Storage``), ``ember doctor --recover`` when it rebuilds one (``note_recovery``).
An entry holds two kinds of fields:

- the latest standing a process reported: ``state``, ``detail``, ``since``, ``was``,
  ``held_writes``, ``caught_up_writes``, ``fix``;
- counts that only grow, summed over every process and every recovery: ``dropped_writes`` and
  ``dropped_by`` (accepted writes never stored, by kind), ``lost_at_kill`` (answered requests a
  proxy killed before it wrote their rows left without one), ``unrecovered_rows`` and
  ``unrecovered_by`` (rows ``ember doctor --recover`` could not copy, by table), with
  ``lost_since`` (when the first of them was counted).

A process adds what it lost *since it last reported* (``Reported``: deltas, never its totals):
written as totals, the next proxy's report, or a recovery clearing the entry, made 50 dropped
accounting rows read "0 lost". The file is changed under an exclusive ``flock`` on
``storage-problems.json.lock`` (best effort, POSIX), so two proxies sharing a home add up
instead of overwriting each other. An entry is removed only when its database is fine and
nothing was ever lost in it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.fsutil import write_json
from ember.store.health import Health

if TYPE_CHECKING:
    from ember.store.recovered import RecoveryReport

try:  # POSIX; elsewhere the file is changed without a lock
    import fcntl
except ImportError:  # pragma: no cover - windows
    fcntl = None  # type: ignore[assignment]

PROBLEMS_FILE = "storage-problems.json"

Entry = dict[str, Any]


def problems_path(home: Path) -> Path:
    return home / PROBLEMS_FILE


def read_problems(home: Path) -> dict[str, Entry]:
    """Entries by database (its path); empty when there is no file or it cannot be read."""
    try:
        data = json.loads(problems_path(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    fd: int | None = None
    if fcntl is not None:
        with contextlib.suppress(OSError):
            fd = os.open(
                problems_path(home).with_suffix(".json.lock"), os.O_RDWR | os.O_CREAT, 0o600
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def change(home: Path, db: str, edit: Callable[[Entry | None], Entry | None]) -> None:
    """Replace ``db``'s entry with ``edit(entry)`` (None removes it), under the lock. Raises
    ``OSError`` when the file cannot be written."""
    with _locked(home):
        data = read_problems(home)
        new = edit(data.get(db))
        if new is None:
            if data.pop(db, None) is None:
                return
        else:
            data[db] = new
        write_json(problems_path(home), data, private=True)


def clear_problem(home: Path, db: Path) -> None:
    change(home, str(db), lambda _: None)


def _counts(entry: Entry | None, key: str) -> Counter[str]:
    raw = (entry or {}).get(key) or {}
    return Counter({str(k): int(v) for k, v in raw.items() if isinstance(v, int)})


def lost_total(entry: Entry) -> int:
    """Everything the entry says was lost: dropped, left by a kill, not recovered."""
    return (
        int(entry.get("dropped_writes") or 0)
        + int(entry.get("lost_at_kill") or 0)
        + int(entry.get("unrecovered_rows") or 0)
    )


def merged(entry: Entry | None, health: Health, dropped: Counter[str], killed: int) -> Entry | None:
    """The entry after a process reported ``health``, having lost ``dropped`` (by kind) and
    ``killed`` since its last report (pure). None: nothing to keep."""
    by = _counts(entry, "dropped_by") + dropped
    new: Entry = {
        k: v for k, v in (entry or {}).items() if k.startswith(("unrecovered", "recovered"))
    }
    new.update(health.to_json())
    new["dropped_by"] = dict(sorted(by.items()))
    new["dropped_writes"] = sum(by.values())
    new["lost_at_kill"] = int((entry or {}).get("lost_at_kill") or 0) + killed
    new["lost_since"] = (entry or {}).get("lost_since")
    if lost_total(new) and new["lost_since"] is None:
        new["lost_since"] = time.time()
    if health.ok and not health.held and not lost_total(new) and not _uncounted(new):
        return None
    return new


def _uncounted(entry: Entry) -> list[str]:
    """Tables a recovery said may have lost more than it counted."""
    return list(entry.get("unrecovered_uncounted") or [])


def recovered(entry: Entry | None, db: str, report: RecoveryReport) -> Entry | None:
    """The entry after ``ember doctor --recover`` rebuilt ``db`` (pure): fine again, every
    earlier count kept, and the rows it could not copy added."""
    unrecovered = _counts(entry, "unrecovered_by")
    unrecovered.update({name: t.lost for name, t in report.tables.items() if t.lost})
    uncounted = sorted(
        set((entry or {}).get("unrecovered_uncounted") or []) | set(report.uncounted)
    )
    new: Entry = dict(entry or {})
    new.update(
        db=db,
        state="ok",
        detail="",
        was="corrupt",
        held_writes=0,
        fix="",
        since=time.time(),
        recovered_at=time.time(),
        recovered_kept_as=str(report.kept_as) if report.kept_as else None,
        unrecovered_by=dict(sorted(unrecovered.items())),
        unrecovered_rows=sum(unrecovered.values()),
        unrecovered_uncounted=uncounted,
    )
    new.setdefault("dropped_writes", 0)
    new.setdefault("dropped_by", {})
    new.setdefault("lost_at_kill", 0)
    if not lost_total(new) and not uncounted:
        return None
    if new.get("lost_since") is None:
        new["lost_since"] = time.time()
    return new


def note_recovery(home: Path, db: Path, report: RecoveryReport) -> None:
    """Record that ``ember doctor --recover`` rebuilt ``db``, keeping what was lost before."""
    change(home, str(db), lambda entry: recovered(entry, str(db), report))


class Reported:
    """What one process already added to the file, per database: its next report adds only
    what it lost since (its health's counts cover the process's whole life)."""

    def __init__(self) -> None:
        self._dropped: dict[str, Counter[str]] = {}
        self._killed: dict[str, int] = {}

    def record(self, home: Path, health: Health) -> None:
        """Write ``health`` into ``db``'s entry. Raises ``OSError``; then nothing counts as
        told, and the next report adds it."""
        now = Counter(dict(health.dropped_by))
        dropped = now - self._dropped.get(health.path, Counter())
        killed = health.lost_at_kill - self._killed.get(health.path, 0)
        change(home, health.path, lambda entry: merged(entry, health, dropped, killed))
        self._dropped[health.path] = now
        self._killed[health.path] = health.lost_at_kill

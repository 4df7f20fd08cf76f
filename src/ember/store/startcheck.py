"""Damage looked for when a proxy starts, not only when a write meets it.

A database's writer checks its file when it first opens it (``writerloop``), but a project's
file is opened only when a request of that project comes: a proxy started on a damaged file
said ``/healthz`` ok, and ``ember_storage_problems`` 0, until its first write failed. At start
the proxy now reads every database of the home once, in a background thread (serving does not
wait for it): the WAL a stopped process left (``fileguard.left_wal``) and ``PRAGMA
quick_check``, each read-only. A damaged file is switched off at once (``Database.found_damaged``:
one log line, ``/healthz``, the metric), exactly as a write that met the damage would.

Files a proxy reported before come first, then the smallest: the likeliest damage, and the
most files, are known soonest. ``quick_check`` reads the whole file, once per start: 0.07 s
for a 100 MB file in the page cache here (a cold disk reads slower).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from ember.errors import StorageError
from ember.store.fileguard import left_wal, quick_check
from ember.store.inspect import databases
from ember.store.problems import read_problems
from ember.store.registry import Storage
from ember.store.writer import FileFailure

log = logging.getLogger(__name__)


def look_for_damage(storage: Storage) -> list[Path]:
    """Check every database of ``storage``'s home; switch the damaged ones off. Returns them.
    Nothing on a PostgreSQL store (no files), and it stops early once ``storage`` closes."""
    if storage.postgres:
        return []
    started = time.monotonic()
    recorded = read_problems(storage.home)
    targets = databases(storage.home)
    targets.sort(key=lambda t: (str(t[0]) not in recorded, _size(t[0])))
    found: list[Path] = []
    for path, schema in targets:
        if storage.closing:
            break
        failure = damage(path)
        if failure is not None:
            storage.database(path, schema).found_damaged(failure)
            found.append(path)
    log.debug(
        "start check: %d databases in %.2fs, %d damaged",
        len(targets),
        time.monotonic() - started,
        len(found),
    )
    return found


def damage(path: Path) -> BaseException | None:
    """What is wrong with ``path`` as it is on disk (None: nothing found, or it could not be
    looked at now: the writes will tell)."""
    scan = left_wal(path)
    if scan is not None and scan.unverifiable:
        return StorageError(f"the WAL is damaged: {scan.damage}")
    try:
        quick_check(path)
    except FileFailure as failure:
        return failure.cause if failure.state == "corrupt" else None
    return None


def start(storage: Storage) -> threading.Thread:
    """``look_for_damage`` in a daemon thread (the proxy serves meanwhile)."""

    def run() -> None:
        try:
            look_for_damage(storage)
        except Exception:
            log.exception("the check of the databases at start failed; writes still check them")

    thread = threading.Thread(target=run, name="ember-start-check", daemon=True)
    thread.start()
    return thread


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0

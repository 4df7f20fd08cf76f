"""At start: the writes a stopped (or killed) process left in this home's write journal.

A proxy that stopped while its PostgreSQL server was down kept the writes it held in its
journal (``pg.journal``); one killed with ``kill -9`` left those it had not committed yet.
The next process to start on the same ``EMBER_HOME`` and store (``deliver_left``, in a worker
thread, before the answer journal's recount: a row delivered here is not missing) submits
each of them again, in order, to its schema — journaled anew in its own journal first, so a
second stop or kill loses none of them — then deletes the segments they came from.

Invariants, and what each prevents:

- Each write keeps its key and is marked replayed: the transaction that would apply it
  first looks the key up (``batch``), so a write whose COMMIT had taken before the stop is
  not applied twice.
- Only segments no live process holds are read (``journalcheck.dead_segments``), and only
  those of this store: a home whose ``store_url`` changed keeps the other server's writes
  for a start that has that URL again (said once).
- A write this version cannot run (its function is gone) is counted as dropped in its
  database's health, never silently skipped.
- Submitting waits for nothing: with the server down the writes are held (and journaled)
  like any other; with it up, the schemas are flushed (bounded) before returning.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import Counter
from pathlib import Path

from ember.store.database import Database
from ember.store.health import kind_of
from ember.store.journal import journal_dir
from ember.store.journalcheck import dead_segments
from ember.store.ops import Op, UnknownOp, resolve
from ember.store.pg.journal import PREFIX, SUFFIX, Held, read_left
from ember.store.pg.url import redacted
from ember.store.registry import Storage
from ember.store.schema import PROJECT, STATS

log = logging.getLogger("ember.store.database")

_SCHEMAS = {PROJECT.name: PROJECT, STATS.name: STATS}


def deliver_left(storage: Storage, timeout: float) -> int:
    """Submit what stopped processes left for this store; the number of writes submitted."""
    assert storage.store_url is not None
    store = redacted(storage.store_url)
    directory = journal_dir(storage.home)
    dead = dead_segments(directory, prefix=PREFIX, suffix=SUFFIX)
    if not dead.paths:
        return 0
    journal = storage.write_journal()
    ours: set[Path] = set()
    dbs: list[Database] = []
    try:
        left = read_left(dead.paths, store)
        ours = set(left.paths)
        if journal is None and left.writes:
            ours = set()  # nowhere to keep them while they are delivered: a later start will
            return 0
        dbs, unknown = _submit(storage, left.writes)
        if journal is not None:
            journal.sync()  # journaled again, on disk: the old segments can go
        _say(storage, store, directory, len(left.writes), unknown, left.elsewhere)
    finally:
        _release(dead.paths, dead.fds, delete=ours)
    for db in dbs:
        db.flush(timeout)
    return len(left.writes) - sum(unknown.values())


def _submit(storage: Storage, writes: list[Held]) -> tuple[list[Database], Counter[str]]:
    home = storage.home
    dbs: dict[Path, Database] = {}
    unknown: Counter[str] = Counter()
    for held in writes:
        path = home / held.path
        schema = _SCHEMAS.get(held.schema)
        try:
            if schema is None:
                raise UnknownOp(f"a write to a {held.schema} database")
            fn = resolve(held.op)
        except UnknownOp as exc:
            log.debug("a journaled write cannot be delivered: %s", exc)
            unknown[str(path)] += 1
            if schema is not None:
                storage.database(path, schema).lost(kind_of(held.label), 1)
            continue
        db = dbs.get(path) or storage.database(path, schema)
        dbs[path] = db
        db.submit(Op(fn, held.args, key=held.key, replayed=True), label=held.label)
    return list(dbs.values()), unknown


def _say(
    storage: Storage,
    store: str,
    directory: Path,
    found: int,
    unknown: Counter[str],
    elsewhere: dict[str, int],
) -> None:
    if found:
        lost = sum(unknown.values())
        tail = f"; {lost} cannot be run by this version and are counted as lost" if lost else ""
        log.warning(
            "delivering %d writes for PostgreSQL at %s that a stopped proxy left in %s%s",
            found - lost,
            store,
            directory,
            tail,
        )
    for other, n in sorted(elsewhere.items()):
        log.warning(
            "%s holds %d journal files of writes for %s, not this store_url (%s): they are "
            "kept for a start with that store",
            directory,
            n,
            other,
            store,
        )


def _release(paths: list[Path], fds: list[int], *, delete: set[Path]) -> None:
    for path, fd in zip(paths, fds, strict=True):
        if path in delete:
            with contextlib.suppress(OSError):
                path.unlink()
        with contextlib.suppress(OSError):
            os.close(fd)

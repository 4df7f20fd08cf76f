"""At start: which answered requests of a proxy that died have no accounting row.

The journal (``store.journal``) of a proxy killed under load still names the answers whose
rows may not have reached a file. The next proxy to start (``recount``, in a worker thread)
reads every segment no live process holds, looks each answer's row up in its database (by its
own key: ``session_id`` and ``ts``, of the client's origin), and says how many have none —
once: one log line, the database's health (``/healthz``, ``storage-problems.json`` and so
``ember stats``: ``lost_at_kill``). The segments are deleted once counted; a database that
cannot be read now (damaged, switched off) keeps its segments for a later start.

Where a row goes: the database its answer named, or the one a later line moved it to; a row
named none (its session had not named its project when the proxy died) is looked for in the
databases of its session's other answers, then in ``stats.db``, where it would have gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ember.errors import StorageError
from ember.fsutil import write_bytes
from ember.store import segments
from ember.store.driver import Connection
from ember.store.journal import PREFIX, SUFFIX
from ember.store.registry import Storage, stats_db_path
from ember.store.schema import PROJECT, STATS

log = logging.getLogger(__name__)

Key = tuple[float, str]


@dataclass
class Dead:
    """The segments of proxies that died, locked by this process while they are counted."""

    paths: list[Path] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)

    def release(self, delete: bool) -> None:
        for path, fd in zip(self.paths, self.fds, strict=True):
            if delete:
                segments.remove(path, fd)
            else:
                os.close(fd)


def dead_segments(directory: Path, *, prefix: str = PREFIX, suffix: str = SUFFIX) -> Dead:
    """The segments no process holds (a live proxy holds each of its own), locked now
    (``prefix``/``suffix``: the answer journal's unless said; ``store.pg.journal`` keeps
    its writes in the same folder)."""
    dead = Dead()
    if not segments.LOCKS or not directory.is_dir():
        return dead
    for path in sorted(directory.glob(f"{prefix}*{suffix}")):
        fd = segments.lock_if_dead(path)
        if fd is None:
            continue  # a live proxy's, or deleted meanwhile by its owner
        dead.paths.append(path)
        dead.fds.append(fd)
    return dead


def entries(paths: list[Path], home: Path) -> dict[Path, set[Key]]:
    """The answers the segments name, by the database their rows go to (pure but for the
    reading). A line cut short is skipped: it was never a whole entry."""
    answered: dict[Key, str] = {}
    moved: dict[Key, str] = {}
    for path in paths:
        with contextlib.suppress(OSError):
            for raw in path.read_bytes().splitlines():
                line = _line(raw)
                if line is not None:
                    kind, key, db = line
                    (answered if kind == "a" else moved)[key] = db
    by_session: dict[str, str] = {}
    for (_, session), db in [*answered.items(), *moved.items()]:
        if db:
            by_session.setdefault(session, db)
    out: dict[Path, set[Key]] = defaultdict(set)
    for key, db in answered.items():
        where = moved.get(key) or db or by_session.get(key[1]) or str(stats_db_path(home))
        out[Path(where)].add(key)
    return dict(out)


def _line(raw: bytes) -> tuple[str, Key, str] | None:
    try:
        value: Any = orjson.loads(raw)
        kind, ts, session, db = value
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return None
    if kind not in ("a", "m") or not isinstance(ts, float) or not isinstance(session, str):
        return None
    return str(kind), (ts, session), str(db)


def _present(keys: set[Key]) -> Any:
    def look(conn: Connection) -> set[Key]:
        found = set()
        for ts, session in keys:
            row = conn.execute(
                "SELECT 1 FROM exchanges WHERE session_id = ? AND ts = ? AND origin = 'client'",
                (session, ts),
            ).fetchone()
            if row is not None:
                found.add((ts, session))
        return found

    return look


def missing(
    storage: Storage, wanted: dict[Path, set[Key]]
) -> tuple[dict[Path, int], dict[Path, set[Key]]]:
    """Answers without a row, by database; and the answers of databases that cannot be
    read now (to be looked up at a later start)."""
    lost: dict[Path, int] = {}
    unread: dict[Path, set[Key]] = {}
    why = ""
    for path, keys in wanted.items():
        schema = STATS if path == stats_db_path(storage.home) else PROJECT
        try:
            if not storage.holds(path, schema):  # a PostgreSQL server down raises here
                lost[path] = len(keys)  # its first row never reached a file
                continue
            found = storage.database(path, schema).read(_present(keys))
        except StorageError as exc:
            why = why or str(exc)
            unread[path] = keys
            continue
        if len(keys) > len(found):
            lost[path] = len(keys) - len(found)
    if unread:  # one line, however many databases (a server down is all of them)
        log.warning(
            "cannot look up the rows of %d answers of a killed proxy now (%s); a later start "
            "looks them up",
            sum(len(k) for k in unread.values()),
            why,
        )
    return lost, unread


def carry(directory: Path, unread: dict[Path, set[Key]]) -> None:
    """Write the answers of databases that could not be read into a segment of their own,
    unlocked, for the next start (the segments they came from are deleted: what was counted
    is never counted twice)."""
    if not unread:
        return
    lines = [
        orjson.dumps(["a", ts, session, str(db)])
        for db, keys in sorted(unread.items())
        for ts, session in sorted(keys)
    ]
    name = f"{PREFIX}carried-{os.getpid()}-{time.time_ns()}-000001{SUFFIX}"
    write_bytes(directory / name, b"\n".join(lines) + b"\n")


def recount(storage: Storage, directory: Path) -> dict[Path, int]:
    """Count, report and delete what dead proxies' journals name; returns the counts."""
    dead = dead_segments(directory)
    if not dead.paths:
        return {}
    counted = False
    try:
        lost, unread = missing(storage, entries(dead.paths, storage.home))
        carry(directory, unread)
        counted = True
        for path, n in lost.items():
            schema = STATS if path == stats_db_path(storage.home) else PROJECT
            storage.database(path, schema).note_lost_at_kill(n)
        if lost:
            log.warning(
                "%d answered requests of an earlier run have no accounting row (the proxy "
                "was killed before writing them): %s; counted in `ember stats` and /healthz",
                sum(lost.values()),
                ", ".join(f"{n} in {p}" for p, n in sorted(lost.items())),
            )
    finally:
        dead.release(delete=counted)
    return lost

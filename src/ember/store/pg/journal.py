"""The write journal: what a PostgreSQL store has been asked to write and has not written yet,
on the local disk, so that neither an outage nor a restart (nor a ``kill -9``) loses it.

Every write that can be written down (an ``Op``: accounting rows, the memory ledger,
transcripts) is appended here when it is submitted (``append``), before the database's
writer has it, and noted as done once it is committed (``done``). While the server is down
the journal grows with the writes held for it; when the process stops, or dies, with writes
not delivered, the next proxy to start on the same ``EMBER_HOME`` and store delivers them
(``store.pg.deliver``).

Invariants, and what each prevents:

- A line is written with one ``os.write`` to a file opened ``O_APPEND``: once ``append``
  returns it is in the kernel, which a killed process cannot take back; ``sync`` (every
  second, on a thread of its own) bounds what a power loss takes to that second.
- Files are private: the folder 0700, each segment 0600 (transcripts are in them; their
  text is masked before it is written here, as before it is stored).
- Bounded: past ``limit`` bytes of segments ``append`` refuses (None) — the caller counts the
  write as dropped, and says so once — rather than filling the user's disk during an outage
  that lasts a week.
- A live process holds an exclusive ``flock`` on each of its segments until it deletes it or
  ends: the next start reads only segments no process holds (``store.journalcheck``'s
  ``dead_segments``), never a live proxy's.
- A segment is deleted once it is sealed (full, or the process stopped) and each of its
  writes is done; a done note is written into the segment of its write, so a segment is
  read alone.
- Each segment begins with the store it belongs to (the URL without its password): a home
  whose ``store_url`` changed never delivers one server's writes to another.

Lines are JSON arrays: ``["h", 1, store]`` first, ``["w", key, path, schema, label, op,
args]`` for a write, ``["d", [key, ...]]`` for writes done (committed, or given up and
counted as dropped). ``key`` is the op's (``store.ops``): the store records it with the
write, so a write replayed after its COMMIT did take is applied once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ember.fsutil import private_dirs
from ember.store import segments
from ember.store.ops import Op

log = logging.getLogger(__name__)

PREFIX = "writes-"
SUFFIX = ".jsonl"
#: A segment is sealed (and deletable once all of it is done) past this size.
SEGMENT_BYTES = 8 * 1024 * 1024
#: How often what was appended is fsynced.
SYNC_SECONDS = 1.0
VERSION = 1


@dataclass(eq=False)
class Segment:
    path: Path
    fd: int
    size: int = 0
    open_writes: int = 0
    sealed: bool = False
    dirty: bool = False


@dataclass(eq=False)
class Ticket:
    """One write in the journal until it is done."""

    segment: Segment
    key: int
    size: int


@dataclass
class Refusals:
    """Writes the journal refused since it last had room (reset once it has room again)."""

    count: int = 0
    cause: str = ""
    said: bool = False


class WriteJournal:
    """The journal of one process (thread-safe: ``append`` on the event loop, ``done`` on
    writer threads, ``sync`` on its own thread)."""

    def __init__(
        self,
        directory: Path,
        store: str,
        *,
        limit: int,
        segment_bytes: int = SEGMENT_BYTES,
        sync_seconds: float = SYNC_SECONDS,
    ) -> None:
        """``store``: the store's name (``pg.url.redacted``); ``limit``: bytes of segments at
        most. Creates ``directory`` (0700) and the first segment; raises ``OSError``."""
        private_dirs(directory)
        self.directory = directory
        self.store = store
        self.limit = limit
        self.segment_bytes = segment_bytes
        self._run = f"{PREFIX}{time.time_ns() // 1_000_000:013d}-{os.getpid()}"
        self._seq = 0
        self._lock = threading.Lock()
        self._segments: list[Segment] = []
        self._size = 0  # bytes of every segment this journal holds
        self.refused = Refusals()
        self._current = self._new_segment()
        self._stop = threading.Event()
        self._syncer = threading.Thread(
            target=self._sync_forever, args=(sync_seconds,), name="ember-journal", daemon=True
        )
        self._syncer.start()

    # -- writing ----------------------------------------------------------------------------

    def append(self, op: Op, path: Path, schema: str, label: str) -> Ticket | None:
        """Write ``op`` down (it gets a key if it has none); its ticket, or None when the
        journal is full or cannot be written (``refused`` says why)."""
        key = op.keyed()
        try:
            line = orjson.dumps(["w", key, str(path), schema, label, op.name, op.args]) + b"\n"
        except TypeError as exc:  # a bug: an argument JSON cannot hold
            log.error("write %s cannot be journaled: %s", op.name, exc)
            return None
        with self._lock:
            if self._size + len(line) > self.limit:
                self._refuse(f"the journal holds {self._size // 1_000_000} MB, its limit")
                return None
            segment = self._current
            try:
                os.write(segment.fd, line)
            except OSError as exc:
                self._refuse(f"it cannot be written: {exc}")
                return None
            self.refused = Refusals() if self.refused.count else self.refused
            segment.size += len(line)
            segment.open_writes += 1
            segment.dirty = True
            self._size += len(line)
            ticket = Ticket(segment, key, len(line))
            if segment.size >= self.segment_bytes:
                self._rotate()
        op.ticket = ticket
        return ticket

    def done(self, tickets: Iterable[Ticket]) -> None:
        """The writes of ``tickets`` are done with (committed, or counted as dropped)."""
        by_segment: dict[Segment, list[int]] = {}
        for t in tickets:
            by_segment.setdefault(t.segment, []).append(t.key)
        if not by_segment:
            return
        with self._lock:
            for segment, keys in by_segment.items():
                if segment.fd < 0:
                    continue  # kept at the stop: the store's keys decide at the next start
                segment.open_writes -= len(keys)
                if segment.sealed and segment.open_writes <= 0:
                    self._delete(segment)
                    continue
                line = orjson.dumps(["d", keys]) + b"\n"
                with contextlib.suppress(OSError):  # the keys the store holds decide then
                    os.write(segment.fd, line)
                    segment.size += len(line)
                    self._size += len(line)
                    segment.dirty = True

    def sync(self) -> None:
        """``fsync`` the segments written since the last call (blocking)."""
        with self._lock:
            dirty = [s for s in self._segments if s.dirty]
            for s in dirty:
                s.dirty = False
            fds = [s.fd for s in dirty]
        for fd in fds:
            with contextlib.suppress(OSError):  # closed meanwhile: deleted, nothing to keep
                os.fsync(fd)

    def close(self) -> int:
        """A stop, after the databases' own (their last writes are done by then): segments
        all done are deleted, the others stay, unlocked, for the next start. Returns the
        writes kept."""
        self._stop.set()
        self.sync()
        with self._lock:
            self._current.sealed = True
            kept = 0
            for s in list(self._segments):
                if s.open_writes <= 0:
                    self._delete(s)
                    continue
                kept += s.open_writes
                with contextlib.suppress(OSError):
                    os.close(s.fd)  # its lock goes with it
                s.fd = -1  # a late note never writes to a number the process reused
                self._segments.remove(s)
            return kept

    @property
    def size(self) -> int:
        return self._size

    @property
    def pending(self) -> int:
        """Writes appended and not done."""
        with self._lock:
            return sum(s.open_writes for s in self._segments)

    @property
    def segments(self) -> list[Path]:
        with self._lock:
            return [s.path for s in self._segments]

    # -- under the lock ---------------------------------------------------------------------

    def _new_segment(self) -> Segment:
        self._seq += 1
        path = self.directory / f"{self._run}-{self._seq:06d}{SUFFIX}"
        fd = segments.create(path)
        header = orjson.dumps(["h", VERSION, self.store]) + b"\n"
        try:
            os.write(fd, header)
        except OSError:
            segments.remove(path, fd)
            raise
        segment = Segment(path, fd, size=len(header), dirty=True)
        self._segments.append(segment)
        self._size += len(header)
        return segment

    def _rotate(self) -> None:
        old = self._current
        try:
            self._current = self._new_segment()
        except OSError:
            return  # the full segment goes on taking writes; the limit still holds
        old.sealed = True
        if old.open_writes <= 0:
            self._delete(old)

    def _delete(self, segment: Segment) -> None:
        segments.remove(segment.path, segment.fd)
        with contextlib.suppress(ValueError):
            self._segments.remove(segment)
        self._size -= segment.size

    def _refuse(self, cause: str) -> None:
        self.refused.count += 1
        self.refused.cause = cause

    def _sync_forever(self, every: float) -> None:
        while not self._stop.wait(every):
            self.sync()


# -- what a process that stopped left ---------------------------------------------------------


@dataclass(frozen=True)
class Held:
    """A write a stopped process journaled and never noted as done."""

    key: int
    path: str
    schema: str
    label: str
    op: str
    args: Any


@dataclass
class Left:
    """What the unlocked segments of a folder hold for one store."""

    writes: list[Held] = field(default_factory=list)
    #: segments of this store (deleted once their writes are journaled again)
    paths: list[Path] = field(default_factory=list)
    #: segments of other stores, by store: left as they are
    elsewhere: dict[str, int] = field(default_factory=dict)
    #: lines that were not whole (a write cut short by the kill): never a whole write
    torn: int = 0


def read_left(paths: list[Path], store: str) -> Left:
    """The writes not done in ``paths`` (segments no process holds), in the order they were
    journaled, each once (pure but for the reading)."""
    left = Left()
    writes: dict[int, Held] = {}
    done: set[int] = set()
    for path in sorted(paths, key=lambda p: p.name):
        try:
            lines = path.read_bytes().splitlines()
        except OSError:
            continue
        head = _parse(lines[0]) if lines else None
        owner = head[2] if isinstance(head, list) and len(head) == 3 and head[0] == "h" else None
        if owner != store:
            name = str(owner) if owner is not None else "an unknown store"
            left.elsewhere[name] = left.elsewhere.get(name, 0) + 1
            continue
        left.paths.append(path)
        for raw in lines[1:]:
            line = _parse(raw)
            try:
                if isinstance(line, list) and len(line) == 7 and line[0] == "w":
                    _, key, where, schema, label, op, args = line
                    held = Held(int(key), str(where), str(schema), str(label), str(op), args)
                    writes.setdefault(held.key, held)
                elif isinstance(line, list) and len(line) == 2 and line[0] == "d":
                    done.update(int(k) for k in line[1])
                else:
                    left.torn += 1
            except (TypeError, ValueError):
                left.torn += 1  # not a line of this journal's: never a whole write
    left.writes = [w for k, w in writes.items() if k not in done]
    return left


def _parse(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None

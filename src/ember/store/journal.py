"""The answer journal: a trace of answered requests that a ``kill -9`` cannot lose.

An accounting row is queued once the client has its answer and committed by the database's
writer a moment later (``store.accounting``): a ``kill -9`` in between lost rows without a
word (9 of 1,275 answered requests under 8 streaming clients, reported nowhere). The journal
is how the next start knows: it names every answered request whose row may not be in a file
yet, and ``journalcheck`` looks them up after the kill.

Invariants:
- An answer is journaled before its last byte is handed to the client (``answered``; the
  proxy calls it from the exchange's flow): one line written with ``os.write`` to a file
  opened ``O_APPEND``. Once the call returns the line is in the kernel, which a killed process
  cannot take back; ``sync`` (each second) bounds what a power loss can take to that second.
  Cost: a few microseconds per answer (``bench/answer_journal.py``).
- An entry is *retired* once its row's write is done — committed, or dropped and counted by
  the database's health (``retire``, on the writer's thread). The journal is cut into
  segments; a segment that is full (``SEGMENT_ENTRIES``) or closed, and whose entries are all
  retired, is deleted: the journal holds about the rows in flight, never the history.
- A live proxy's segments are locked (an exclusive ``flock`` on each, held until it is
  deleted or the process ends): the next proxy to start reads only the segments no process
  holds — those of proxies that died, or that stopped before their last rows were done.

A line is a JSON array: ``["a", ts, session_id, db]`` for an answer (``db``: the database the
row goes to, ``""`` while its session has not named its project), ``["m", ts, session_id,
db]`` when such a row was given a database later (``moved``). ``(session_id, ts)`` is the
row's own key: ``exchanges.ts`` is the exchange's ``wall_started``, written as the same float.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from ember.store import segments

log = logging.getLogger(__name__)

#: Entries per segment: a segment is deleted once all of its entries are retired.
SEGMENT_ENTRIES = 4096
JOURNAL_DIR = "journal"
PREFIX = "answers-"
SUFFIX = ".jsonl"


def journal_dir(home: Path) -> Path:
    return home / JOURNAL_DIR


@dataclass(eq=False)
class Segment:
    """One file of the journal; ``open_entries`` counts the entries not retired yet."""

    path: Path
    fd: int
    entries: int = 0
    open_entries: int = 0
    sealed: bool = False
    dirty: bool = False


class AnswerJournal:
    """The journal of one proxy process (thread-safe: ``answered`` on the event loop,
    ``retire`` on writer threads, ``sync`` on a worker)."""

    def __init__(self, directory: Path, *, segment_entries: int = SEGMENT_ENTRIES) -> None:
        """Creates ``directory`` (0700) and the first segment; raises ``OSError``."""
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.directory = directory
        self.segment_entries = segment_entries
        self._run = f"{PREFIX}{os.getpid()}-{time.time_ns() // 1_000_000}"
        self._seq = 0
        self._lock = threading.Lock()
        self._segments: list[Segment] = []
        self._current = self._new_segment()

    def _new_segment(self) -> Segment:
        self._seq += 1
        path = self.directory / f"{self._run}-{self._seq:06d}{SUFFIX}"
        segment = Segment(path, segments.create(path))
        self._segments.append(segment)
        return segment

    def answered(self, ts: float, session_id: str, db: Path | None) -> Segment | None:
        """Journal an answer whose row goes to ``db`` (None: not known yet); the segment to
        ``retire`` it from, or None when the line could not be written (logged once)."""
        line = orjson.dumps(["a", ts, session_id, str(db) if db is not None else ""]) + b"\n"
        with self._lock:
            segment = self._current
            try:
                os.write(segment.fd, line)
            except OSError as exc:
                self._cannot_write(exc)
                return None
            segment.entries += 1
            segment.open_entries += 1
            segment.dirty = True
            if segment.entries >= self.segment_entries:
                self._rotate()
            return segment

    def moved(self, ts: float, session_id: str, db: Path) -> None:
        """A row journaled without a database was given ``db`` (its session named its
        project): the next start looks for it there."""
        line = orjson.dumps(["m", ts, session_id, str(db)]) + b"\n"
        with self._lock, contextlib.suppress(OSError):
            os.write(self._current.fd, line)
            self._current.dirty = True

    def retire(self, segment: Segment | None) -> None:
        """The row of an entry of ``segment`` is done with (written, or counted as lost)."""
        if segment is None:
            return
        with self._lock:
            segment.open_entries -= 1
            if segment.sealed and segment.open_entries <= 0:
                self._delete(segment)

    def sync(self) -> None:
        """``fsync`` the segments written since the last call (blocking: a worker thread)."""
        with self._lock:
            dirty = [s for s in self._segments if s.dirty]
            for s in dirty:
                s.dirty = False
        for s in dirty:
            with contextlib.suppress(OSError):
                os.fsync(s.fd)

    def close(self) -> None:
        """A clean stop: no new entries; each segment is deleted once its entries are retired
        (the databases' close writes the last rows after this). A segment still open when the
        process ends stays for the next start to check."""
        with self._lock:
            self._current.sealed = True
            for s in list(self._segments):
                if s.sealed and s.open_entries <= 0:
                    self._delete(s)

    @property
    def segments(self) -> list[Path]:
        with self._lock:
            return [s.path for s in self._segments]

    # -- under the lock ---------------------------------------------------------------------

    def _rotate(self) -> None:
        old = self._current
        try:
            self._current = self._new_segment()
        except OSError as exc:
            self._cannot_write(exc)
            return  # the full segment goes on taking entries
        old.sealed = True
        if old.open_entries <= 0:
            self._delete(old)

    def _delete(self, segment: Segment) -> None:
        segments.remove(segment.path, segment.fd)
        with contextlib.suppress(ValueError):
            self._segments.remove(segment)

    _warned = False

    def _cannot_write(self, exc: OSError) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "the answer journal in %s cannot be written (%s): a kill -9 now may lose "
                "accounting rows without a count (said once)",
                self.directory,
                exc,
            )

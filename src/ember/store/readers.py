"""The read-only connections of one database's owner: a small pool, and one observer.

Readers are used from worker threads, one reader per read transaction (``Database.read``). In
WAL mode they never wait for the writer and never block it. Invariants:
- Every connection here is opened read-only, at the file level: a reader's close never
  checkpoints. Copying the WAL into the main file stays the writer's decision, taken after a
  check passed (``driver.connect``) — a damaged WAL is never copied in by a reader.
- At most ``IDLE_READERS`` are kept between reads (more are opened under load, then closed),
  and a reader given back to an owner that is closed, or whose writer has stopped, is closed
  instead of kept: an idle owner holds no file open. ``keep`` is asked under the pool's lock,
  so a reader given back while the owner closes is either kept before ``close`` empties the
  pool, or closed — never kept after.
- The pool's lock is a leaf: nothing else is locked while it is held, and no SQLite call is
  made under it (``keep`` only reads the owner's flags).
- The observer is one dedicated connection, kept open: ``PRAGMA data_version`` counts commits
  only as that one connection sees them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

from ember.store.driver import Connection, connect, errors

#: Read connections kept open per database (more are opened under load, then closed).
IDLE_READERS = 4


class Readers:
    def __init__(self, path: Path, *, vec: Callable[[], bool], keep: Callable[[], bool]) -> None:
        """``vec``: whether a new reader loads sqlite-vec (asked at each open: the writer may
        have found it unusable since). ``keep``: whether the owner still keeps readers."""
        self.path = path
        self._vec = vec
        self._keep = keep
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self._observer: Connection | None = None
        self._observer_lock = threading.Lock()

    def take(self) -> Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        opened = connect(self.path, readonly=True, vec=self._vec())
        return opened.conn

    def give_back(self, conn: Connection) -> None:
        with self._lock:
            if len(self._idle) < IDLE_READERS and self._keep():
                self._idle.append(conn)
                return
        with contextlib.suppress(errors.Error):
            conn.close()

    def close(self) -> None:
        """Close every idle reader and the observer (a reader in use is closed when given
        back)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(errors.Error):
                conn.close()
        with self._observer_lock:
            if self._observer is not None:
                with contextlib.suppress(errors.Error):
                    self._observer.close()
                self._observer = None

    def data_version(self) -> int:
        """A number that changes whenever any connection commits to the file — another
        process included (``PRAGMA data_version`` of the observer)."""
        with self._observer_lock:
            if self._observer is None:
                self._observer = connect(self.path, readonly=True).conn
            return int(self._observer.execute("PRAGMA data_version").fetchone()[0])

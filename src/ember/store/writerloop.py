"""The writer thread of a database's owner: it opens the file, serves batches, checks, closes.

``WriterLoop`` is the half of ``Database`` that runs on its writer thread; ``Database`` is the
other half: what callers see, the file's ``Health``, and which writes a gap holds or drops
(the hooks at the end of the class). The loop reads the owner's ``_health``; the owner reads
and sets the fields ``__init__`` sets here (the queue, the flags) under the locks named below.
Invariants:
- One writer thread at a time per owner, and it alone holds the write connection: opening,
  migrating, writing, checkpointing and closing it all happen there, never on a caller's
  thread (nor on an event loop). A thread that ends with jobs still queued (they arrived while
  it was leaving) starts its successor unless the owner is closed: no queued job waits for a
  writer that is gone.
- ``_writer``, ``_closed``, ``_suspend`` and ``_retry_at`` change only under the queue's
  condition (``_busy`` is set under it and cleared by the writer alone); the check's fields
  (``_checked``, ``_unchecked``, ``_wal_mark``...) and ``_retries`` are the writer thread's.
- Damage is looked for, not only waited for: ``PRAGMA quick_check`` on a fresh connection
  (``fileguard.quick_check``) when the writer first opens the file, every ``check_seconds``
  while it writes, sooner once the WAL grew by ``WAL_CHECK_BYTES``, and before it closes.
  Automatic checkpoints are off on the writer: the WAL's frames reach the main file only after
  a check passed, so a damaged WAL is never copied over a good file.
- A file found damaged is *quarantined*: no connection of this process writes to it or
  checkpoints it again (``driver.guard``), and ``ember doctor --recover`` finds the file as it
  was at its last good commit. A WAL a stopped process left is read before SQLite's recovery
  runs (``fileguard.left_wal``): frames it would silently drop switch the file off instead.
- A file-level failure ends the session with the failed batch unresolved in hand (``_gap``):
  a transient one requeues what the owner's hold limit admits, drops the rest (counted) and
  opens the file again after a backoff (``health.retry_delay``) while writes are held; a
  corrupt file is never reopened by this process. A job is never resolved twice, and no write
  is dropped without a count.

Lines are logged as ``ember.store.database``, the owner's name: one logger tells everything
about a database's file, wherever in the owner the code that says it lives.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from ember.errors import StorageError
from ember.store import writer as w
from ember.store.driver import Connection, connect, errors, guard
from ember.store.fileguard import left_wal, lock_shared, quick_check, unlock, wal_bytes
from ember.store.health import RETRY_AFTER_SECONDS, TRANSIENT, Health, State, classify, retry_delay
from ember.store.migrations import Schema, migrate
from ember.store.writestats import WriteStats

log = logging.getLogger("ember.store.database")

#: A check is due sooner than every ``check_seconds`` once the WAL grew by this much since the
#: last one: its frames reach the main file only after a check, so the check also bounds how
#: long the WAL grows.
WAL_CHECK_BYTES = 16 * 1024 * 1024


class WriterLoop(ABC):
    #: The file's standing, kept by the owner under its own lock; read here as one reference.
    _health: Health

    def __init__(
        self,
        path: Path,
        schema: Schema,
        *,
        vec: bool,
        idle_seconds: float,
        check_seconds: float,
        log_failures: bool,
    ) -> None:
        self.path = path
        self.schema = schema
        self.vec = vec
        self._log_failures = log_failures
        self._idle_seconds = idle_seconds
        self._check_seconds = check_seconds
        self._queue = w.JobQueue()
        self._writer: threading.Thread | None = None
        self._busy = False  # the writer is running a batch
        self._closed = False
        self._suspend = False
        self._migrated = threading.Event()
        self._retries = 0  # failed retries of the current gap (the backoff's exponent)
        self._retry_at = 0.0  # monotonic: when the next write may try a file that is off
        self._checked = False  # the file was checked since this owner opened it
        self._checked_at = time.monotonic()
        self._unchecked = False  # writes committed since the last check
        self._check_now = False
        self._wal_mark = 0  # the WAL's size at the last check (``_wal_grew``)
        self._guard: Connection | None = None
        self.vec_problem: str | None = None
        self.stats = WriteStats()

    # -- the thread -------------------------------------------------------------------------

    def _start_writer(self) -> None:
        """Caller holds the queue's condition."""
        thread = threading.Thread(
            target=self._writer_main, name=f"ember-writer:{self.path.parent.name}", daemon=True
        )
        self._writer = thread
        self._suspend = False
        thread.start()

    def _writer_main(self) -> None:
        try:
            while self._session():
                pass
        finally:
            with self._queue.cond:
                if self._writer is threading.current_thread():
                    self._writer = None
                    # Jobs that arrived while this thread was leaving get a writer of their own.
                    if len(self._queue) and not self._closed:
                        self._start_writer()

    def _session(self) -> bool:
        """Open the file and run batches until idle, closed or failed. True: go round again
        (a transient failure left writes held; the next attempt waits for the backoff)."""
        if self._health.state == "corrupt":
            self._drop_queued()  # raced with the failure: never reopen a damaged file
            return False
        if self._health.state in TRANSIENT:
            self._wait_for_retry()
        try:
            conn, lock_fd = self._open_writer()
        except w.FileFailure as refused:
            return self._gap(refused.state, refused.cause, [])
        except Exception as exc:
            return self._gap(classify(exc) or "unwritable", exc, [])
        failure: w.FileFailure | None = None
        batch: list[w.Job[Any]] = []
        try:
            failure, batch = self._serve(conn)
            if failure is not None:  # before the close: a damaged file is quarantined
                self._fail(failure.state, failure.cause)
        finally:
            self._let_go(conn)
            unlock(lock_fd)
        if failure is None:
            return False
        return self._gap(failure.state, failure.cause, batch)

    def _let_go(self, conn: Connection) -> None:
        """Close the writer's connection: quarantined when the file is damaged, else last
        (readers never checkpoint: the writer's close copies the WAL into the file and
        removes it, as a clean stop should)."""
        if self._health.state == "corrupt":
            self._quarantine(conn)
            return
        self._close_readers()
        with contextlib.suppress(errors.Error):
            conn.close()

    def _quarantine(self, conn: Connection) -> None:
        """Close a damaged file without a checkpoint: a guard holds the shared lock, so no
        close of this process copies damaged WAL frames into the main file (``driver.guard``).
        The guard stays open until ``close`` — the last connection of the process to close."""
        if self._guard is None:
            self._guard = guard(self.path)
        with contextlib.suppress(errors.Error):
            conn.close()
        self._close_readers()

    # -- a file that failed: hold, retry, or drop -------------------------------------------

    def _wait_for_retry(self) -> None:
        """Sleep until the retry is due; a closing database retries at once (its last try)."""
        with self._queue.cond:
            while not self._closed:
                left = self._retry_at - time.monotonic()
                if left <= 0:
                    return
                self._queue.cond.wait(left)

    def _gap(self, state: State, cause: BaseException, batch: list[w.Job[Any]]) -> bool:
        """The file failed with ``batch`` (rolled back, futures open) in hand. Transient:
        hold what may be held, drop the rest, schedule the retry; True while writes are held
        (the writer retries them). Corrupt, or closing: drop everything; False."""
        self._fail(state, cause)
        if state not in TRANSIENT:
            self._drop(batch)
            self._drop_queued()
            return False
        with self._queue.cond:
            self._queue.requeue(batch)
            shed = self._queue.shed(self._reserve)
            closing = self._closed
            self._retry_at = time.monotonic() + retry_delay(self._retries, RETRY_AFTER_SECONDS)
            self._retries += 1
            held = len(self._queue)
        self._drop(shed)
        if closing:
            self._give_up()
            return False
        return held > 0

    def _drop_queued(self) -> None:
        with self._queue.cond:
            jobs = self._queue.drain()
        self._drop(jobs)

    # -- opening ----------------------------------------------------------------------------

    def _open_writer(self) -> tuple[Connection, int | None]:
        existed = self.path.exists()
        if existed and not self._checked:
            self._check_wal()
        opened = connect(self.path, vec=self.vec)
        conn = opened.conn
        lock_fd: int | None = None
        try:
            self.vec_problem = opened.vec_problem
            # The WAL reaches the main file only after a check passed (``_check``).
            conn.execute("PRAGMA wal_autocheckpoint=0")
            lock_fd = lock_shared(self.path)
            if existed and not self._checked:
                self._check_file()  # damage from before this process: never write on it
            migrate(conn, self.schema.migrations)
        except BaseException as exc:
            if _state_of(exc) == "corrupt":  # before the close: a damaged file is quarantined
                self._fail("corrupt", exc.cause if isinstance(exc, w.FileFailure) else exc)
            self._let_go(conn)
            unlock(lock_fd)
            raise
        self._checked = True
        self._checked_at = time.monotonic()
        self._migrated.set()
        return conn, lock_fd

    def _check_wal(self) -> None:
        """Read a WAL a stopped process left, before SQLite's recovery does: that recovery
        stops at the first frame whose checksum fails, silently, and the next commits then
        overwrite the frames after it — commits ``ember doctor --recover`` could still read.
        Damage there (frames of this WAL, or garbage, past a bad one) switches the file off
        as corrupt; a WAL that merely ends inside a frame (a power loss tore the last write)
        is said once and opened: its last commit is gone either way."""
        scan = left_wal(self.path)
        if scan is None:
            return  # nothing left behind, too large to read here, or in use (it is live)
        if scan.unverifiable:
            raise w.FileFailure("corrupt", StorageError(f"the WAL is damaged: {scan.damage}"))
        if scan.torn and self._log_failures:
            log.warning("database %s: %s; its last commit is lost", self.path, scan.damage)

    # -- serving ----------------------------------------------------------------------------

    def _serve(self, conn: Connection) -> tuple[w.FileFailure | None, list[w.Job[Any]]]:
        """Run batches until idle, suspended or closed (then ``(None, [])``, after a last
        check of what was written), or until the file fails: the failure and its batch."""
        idle_since = time.monotonic()
        while True:
            failure = self._due_check(conn)
            if failure is not None:
                return failure, []
            with self._queue.cond:
                closing = self._closed and len(self._queue) == 0
                leaving = closing or (self._suspend and len(self._queue) == 0)
                batch = None if leaving else self._queue.take(self._wake_in(idle_since))
                if batch is None:
                    idle = time.monotonic() - idle_since >= self._idle_seconds
                    if leaving or idle or self._suspend:
                        break
                    continue
                self._busy = True
            try:
                w.run_batch(conn, batch, time.sleep)
            except w.FileFailure as failure:
                return failure, batch
            finally:
                self._busy = False
            self._committed(batch)
            idle_since = time.monotonic()
        return self._check(conn) if self._unchecked else None, []

    def _committed(self, batch: list[w.Job[Any]]) -> None:
        self.stats.record(batch)
        self._release(batch, written=True)
        self._unchecked = True
        self._retries = 0
        if not self._health.ok:
            self._recovered()
        if self._wal_grew():
            self._check_now = True

    def _wake_in(self, idle_since: float) -> float:
        """How long the writer may sleep: until it is idle long enough to close, or until
        the next check is due."""
        now = time.monotonic()
        wake = idle_since + self._idle_seconds - now
        if self._unchecked:
            wake = min(wake, self._checked_at + self._check_seconds - now)
        return max(0.01, wake)

    # -- checks -----------------------------------------------------------------------------

    def _wal_grew(self) -> bool:
        """Whether the WAL grew by ``WAL_CHECK_BYTES`` since the last check.

        Growth, not size: a WAL file keeps its size after a checkpoint (its frames are then
        rewritten from the start), so "is it past 16 MB" stayed true for good once it was, and
        a ``quick_check`` ran after every commit — half of a busy proxy's CPU (py-spy)."""
        size = wal_bytes(self.path)
        self._wal_mark = min(self._wal_mark, size)  # truncated since
        return size - self._wal_mark >= WAL_CHECK_BYTES

    def _due_check(self, conn: Connection) -> w.FileFailure | None:
        """Check the file when a check is due; a reader that found damage counts as due."""
        if self._health.state == "corrupt":
            return w.FileFailure("corrupt", StorageError(self._health.detail))
        due = time.monotonic() - self._checked_at >= self._check_seconds
        if self._unchecked and (due or self._check_now):
            return self._check(conn)
        return None

    def _check(self, conn: Connection) -> w.FileFailure | None:
        """``quick_check`` the file as it is on disk, then let the checked WAL frames into the
        main file (a passive checkpoint). The failure found, if any."""
        try:
            self._check_file()
            _execute(conn, "PRAGMA wal_checkpoint(PASSIVE)")
        except w.FileFailure as failure:
            return failure
        finally:
            self._checked_at = time.monotonic()
            self._check_now = False
            self._wal_mark = wal_bytes(self.path)
        self._unchecked = False
        return None

    def _check_file(self) -> None:
        """Raise ``FileFailure`` when ``PRAGMA quick_check`` finds damage (on a fresh
        connection: the writer's page cache would hide what changed on disk)."""
        quick_check(self.path)

    # -- what the owner decides (``Database``) ----------------------------------------------

    @abstractmethod
    def _fail(self, state: State, cause: BaseException) -> None:
        """Switch the file off (``state``): said once per change of state."""

    @abstractmethod
    def _recovered(self) -> None:
        """A write committed while the file was off: it is back (unless corrupt)."""

    @abstractmethod
    def _reserve(self, job: w.Job[Any]) -> bool:
        """Whether ``job`` is held through the gap (it takes room in the hold limit)."""

    @abstractmethod
    def _release(self, jobs: list[w.Job[Any]], *, written: bool) -> None:
        """``jobs`` left the gap: written, or dropped."""

    @abstractmethod
    def _drop(self, jobs: list[w.Job[Any]]) -> None:
        """Fail ``jobs`` as unavailable, and count them as dropped."""

    @abstractmethod
    def _give_up(self) -> None:
        """Closing while the file is still off: drop the held writes, and say so."""

    @abstractmethod
    def _close_readers(self) -> None:
        """Close the owner's read connections (before the writer's: readers never
        checkpoint)."""


def _state_of(exc: BaseException) -> State | None:
    return exc.state if isinstance(exc, w.FileFailure) else classify(exc)


def _execute(conn: Connection, sql: str) -> None:
    """Run ``sql``; a file-level error becomes ``FileFailure``."""
    try:
        conn.execute(sql).fetchall()
    except errors.Error as exc:
        state = classify(exc)
        if state is not None:
            raise w.FileFailure(state, exc) from exc
        raise

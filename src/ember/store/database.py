"""``Database``: the one owner of one SQLite file in this process.

Everything that touches a database file goes through its owner: accounting rows, the
injection ledger, memory, and every feature after them. The owner holds
- one writer thread with the only write connection (``writer.py``: batched transactions);
- a small pool of read-only connections, used from worker threads (WAL: readers never wait
  for the writer and never block it);
- the file's health: a file-level failure switches the database off for this process,
  reported once, while requests keep flowing (``health.py``).

Nothing here blocks an event loop: ``submit`` only enqueues (async callers await
``awrite``/``aread``, which run in threads); opening, migrating and closing happen on the
writer thread. No thread lock is ever held across I/O by a caller on the event loop — the
locks here guard a few fields and are released before any SQLite call.

The owner also holds a shared ``flock`` on ``<file>.lock`` while the file is open, so
``ember doctor --recover`` can tell that a proxy still has it open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from ember.errors import StorageError, StorageUnavailable
from ember.store import writer as w
from ember.store.driver import Connection, connect, errors
from ember.store.health import RETRY_AFTER_SECONDS, TRANSIENT, Health, State, classify
from ember.store.migrations import Schema, migrate

try:  # POSIX; elsewhere the owner lock is skipped (doctor then cannot tell)
    import fcntl
except ImportError:  # pragma: no cover - windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Read connections kept open per database (more are opened under load, then closed).
IDLE_READERS = 4
#: A writer with nothing to do for this long closes its connection (reopened on demand).
IDLE_SECONDS = 300.0

ProblemHook = Callable[[Health], None]


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


class Database:
    def __init__(
        self,
        path: Path,
        schema: Schema,
        *,
        vec: bool = False,
        on_problem: ProblemHook | None = None,
        idle_seconds: float = IDLE_SECONDS,
        log_failures: bool = True,
    ) -> None:
        """``log_failures=False`` for a short-lived owner (a CLI command): the error it raises
        already says everything, and a second line from the log would only repeat it."""
        self.path = path
        self._log_failures = log_failures
        self.schema = schema
        self.vec = vec
        self._on_problem = on_problem
        self._idle_seconds = idle_seconds
        self._queue = w.JobQueue()
        self._writer: threading.Thread | None = None
        self._busy = False  # the writer is running a batch
        self._closed = False
        self._migrated = threading.Event()
        self._state_lock = threading.Lock()
        self._health = Health(str(path))
        self._readers: list[Connection] = []
        self._observer: Connection | None = None
        self._observer_lock = threading.Lock()
        self.vec_problem: str | None = None
        self.last_used = time.monotonic()
        self.stats = WriteStats()

    # -- health -----------------------------------------------------------------------------

    @property
    def health(self) -> Health:
        return self._health

    @property
    def open(self) -> bool:
        """The writer thread is running (the file is open)."""
        writer = self._writer
        return writer is not None and writer.is_alive()

    def _refuse(self) -> StorageUnavailable | None:
        """Why a write must not be tried now (None: go ahead). A transient failure is tried
        again once ``RETRY_AFTER_SECONDS`` passed; a corrupt file stays off until restart."""
        with self._state_lock:
            h = self._health
            if h.ok:
                return None
            if h.state in TRANSIENT and time.time() - h.since >= RETRY_AFTER_SECONDS:
                return None
            self._health = replace(h, dropped=h.dropped + 1)
        return self._unavailable(h)

    def _unavailable(self, h: Health) -> StorageUnavailable:
        return StorageUnavailable(h.describe())

    def _fail(self, state: State, cause: BaseException) -> None:
        with self._state_lock:
            before = self._health
            self._health = Health(str(self.path), state, str(cause), time.time(), before.dropped)
            first = before.ok or before.state != state
        if first and self._log_failures:
            log.error(
                "database %s switched off (%s: %s); requests go on without its features. Fix: %s",
                self.path,
                state,
                cause,
                self._health.fix(str(self.path)),
            )
            if self._on_problem is not None:
                with contextlib.suppress(Exception):
                    self._on_problem(self._health)

    def _recovered(self) -> None:
        """The file opened again after a transient failure (never clears ``corrupt``)."""
        with self._state_lock:
            before = self._health
            if before.state not in TRANSIENT:
                return
            self._health = Health(str(self.path), dropped=before.dropped)
        log.warning("database %s is writable again (was %s)", self.path, before.state)
        if self._on_problem is not None:
            with contextlib.suppress(Exception):
                self._on_problem(self._health)

    # -- writes -----------------------------------------------------------------------------

    def submit(
        self,
        fn: Callable[[Connection], T],
        *,
        exclusive: bool = False,
        on_commit: Callable[[], None] | None = None,
        on_rollback: Callable[[], None] | None = None,
        label: str = "",
    ) -> Future[T]:
        """Queue a write; the future resolves once it is committed (or failed). Never blocks."""
        job: w.Job[T] = w.Job(fn, exclusive, on_commit, on_rollback, label)
        refused = self._refuse()
        if refused is not None:
            job.future.set_exception(refused)
            return job.future
        with self._queue.cond:
            if self._closed:
                job.future.set_exception(StorageError(f"{self.path} is closed"))
                return job.future
            self._queue.put(job)
            if self._writer is None:
                self._start_writer()
        self.last_used = time.monotonic()
        return job.future

    def write(self, fn: Callable[[Connection], T], **kw: Any) -> T:
        """``submit`` and wait (worker threads and the CLI only, never the writer itself)."""
        if threading.current_thread() is self._writer:
            raise RuntimeError("Database.write() called from inside a write job (deadlock)")
        return self.submit(fn, **kw).result()

    async def awrite(self, fn: Callable[[Connection], T], **kw: Any) -> T:
        return await asyncio.wrap_future(self.submit(fn, **kw))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued so far is committed; False on timeout."""
        with self._queue.cond:
            if self._writer is None and len(self._queue) == 0:
                return True
        done = self.submit(_noop, label="flush")  # FIFO: resolves after everything before it
        try:
            done.result(timeout)
        except StorageError:
            return True  # switched off: nothing more will be written
        except TimeoutError:
            return False
        return True

    # -- the writer thread ------------------------------------------------------------------

    def _start_writer(self) -> None:
        """Caller holds the queue's condition."""
        thread = threading.Thread(
            target=self._writer_main, name=f"ember-writer:{self.path.parent.name}", daemon=True
        )
        self._writer = thread
        thread.start()

    def _writer_main(self) -> None:
        conn: Connection | None = None
        lock_fd: int | None = None
        try:
            if self._health.state == "corrupt":
                self._fail_queued()  # raced with the failure: never reopen a corrupt file
                return
            try:
                conn, lock_fd = self._open_writer()
            except BaseException as exc:
                self._fail_open(exc)
                return
            self._recovered()
            while True:
                with self._queue.cond:
                    closing = self._closed and len(self._queue) == 0
                    batch = None if closing else self._queue.take(self._idle_seconds)
                    if batch is None:  # idle, suspended or closed: leave (reopened on demand)
                        return
                    self._busy = True
                try:
                    w.run_batch(conn, batch, time.sleep)
                    self.stats.record(batch)
                except w.FileFailure as failure:
                    self._fail(failure.state, failure.cause)
                    self._fail_queued()
                    return
                finally:
                    self._busy = False
        finally:
            if conn is not None:
                with contextlib.suppress(errors.Error):
                    conn.close()
            self._close_readers()
            _unlock(lock_fd)
            with self._queue.cond:
                if self._writer is threading.current_thread():
                    self._writer = None
                    # Jobs that arrived while this thread was leaving get a writer of their own.
                    if len(self._queue) and not self._closed:
                        self._start_writer()

    def _open_writer(self) -> tuple[Connection, int | None]:
        opened = connect(self.path, vec=self.vec)
        conn = opened.conn
        try:
            self.vec_problem = opened.vec_problem
            lock_fd = _lock_shared(self.path)
            migrate(conn, self.schema.migrations)
        except BaseException:
            conn.close()
            raise
        self._migrated.set()
        return conn, lock_fd

    def _fail_open(self, exc: BaseException) -> None:
        state: State = classify(exc) or "unwritable"
        self._fail(state, exc)
        self._fail_queued(exc)

    def _fail_queued(self, cause: BaseException | None = None) -> None:
        with self._queue.cond:
            jobs = self._queue.drain()
        if not jobs:
            return
        with self._state_lock:
            self._health = replace(self._health, dropped=self._health.dropped + len(jobs))
        err = self._unavailable(self._health)
        if cause is not None:
            err.__cause__ = cause
        for job in jobs:
            if not job.future.done():
                job.future.set_exception(err)

    # -- reads ------------------------------------------------------------------------------

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` on a read-only connection in one read transaction (a consistent
        snapshot). Blocking: worker threads and the CLI; async code uses ``aread``."""
        self._ensure_migrated()
        conn = self._take_reader()
        try:
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                conn.execute("COMMIT")
        except errors.Error as exc:
            state = classify(exc)
            if state is None or state == "busy":
                raise
            if state == "corrupt":
                self._fail(state, exc)
            raise StorageUnavailable(Health(str(self.path), state, str(exc)).describe()) from exc
        finally:
            self._give_back(conn)

    async def aread(self, fn: Callable[[Connection], T]) -> T:
        return await asyncio.to_thread(self.read, fn)

    def _ensure_migrated(self) -> None:
        h = self._health
        if h.state == "corrupt":
            raise self._unavailable(h)
        if not self._migrated.is_set():
            self.submit(_noop, label="open").result()

    def _take_reader(self) -> Connection:
        with self._state_lock:
            if self._readers:
                return self._readers.pop()
        opened = connect(self.path, readonly=True, vec=self.vec and self.vec_problem is None)
        return opened.conn

    def _give_back(self, conn: Connection) -> None:
        with self._state_lock:
            if len(self._readers) < IDLE_READERS and not self._closed and self.open:
                self._readers.append(conn)
                return
        with contextlib.suppress(errors.Error):
            conn.close()

    def _close_readers(self) -> None:
        with self._state_lock:
            readers, self._readers = self._readers, []
        for conn in readers:
            with contextlib.suppress(errors.Error):
                conn.close()
        with self._observer_lock:
            if self._observer is not None:
                with contextlib.suppress(errors.Error):
                    self._observer.close()
                self._observer = None

    def data_version(self) -> int:
        """A number that changes whenever any connection commits to the file — another
        process included (``PRAGMA data_version`` of one dedicated connection)."""
        self._ensure_migrated()
        with self._observer_lock:
            if self._observer is None:
                self._observer = connect(self.path, readonly=True).conn
            return int(self._observer.execute("PRAGMA data_version").fetchone()[0])

    # -- lifecycle --------------------------------------------------------------------------

    def idle(self) -> bool:
        return not self._busy and len(self._queue) == 0

    def suspend(self) -> None:
        """Close the file if nothing is queued (reopened by the next use). Never blocks: the
        writer thread wakes up with nothing to do, closes its connections and ends."""
        with self._queue.cond:
            if self._writer is not None and len(self._queue) == 0 and not self._busy:
                self._queue.cond.notify_all()

    def close(self, timeout: float = 30.0) -> None:
        """Commit what is queued, then close (blocking: shutdown and the CLI)."""
        with self._queue.cond:
            self._closed = True
            writer = self._writer
            self._queue.cond.notify_all()
        if writer is not None and writer is not threading.current_thread():
            writer.join(timeout)
            if writer.is_alive():
                log.error("database %s: writes still pending after %.0fs", self.path, timeout)
        self._close_readers()

    def reopen(self) -> None:
        """Allow use again after ``close`` (tests, doctor)."""
        with self._queue.cond:
            self._closed = False


class WriteStats:
    """How the writer is doing: jobs and batches committed, and how long a job waited from
    ``submit`` to its commit (the window a ``kill -9`` can lose), over the last jobs."""

    def __init__(self, keep: int = 20000) -> None:
        self.jobs = 0
        self.batches = 0
        self._waits: deque[float] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def record(self, batch: list[w.Job[Any]]) -> None:
        now = time.monotonic()
        with self._lock:
            self.jobs += len(batch)
            self.batches += 1
            self._waits.extend(now - job.queued_at for job in batch)

    def summary(self) -> dict[str, float]:
        with self._lock:
            waits = sorted(self._waits)
            jobs, batches = self.jobs, self.batches
        if not waits:
            return {"jobs": jobs, "batches": batches}

        def pick(q: float) -> float:
            return waits[min(len(waits) - 1, int(q * len(waits)))]

        return {
            "jobs": jobs,
            "batches": batches,
            "jobs_per_batch": jobs / max(batches, 1),
            "commit_wait_p50_ms": pick(0.5) * 1000,
            "commit_wait_p99_ms": pick(0.99) * 1000,
            "commit_wait_max_ms": waits[-1] * 1000,
        }


def _noop(conn: Connection) -> None:
    return None


def _lock_shared(path: Path) -> int | None:
    """Hold a shared lock on ``<file>.lock`` while the file is open (best effort)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        os.close(fd)
        return None
    return fd


def _unlock(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def in_use(path: Path) -> bool:
    """Whether some process (a proxy, a CLI command) has ``path`` open as its owner."""
    if fcntl is None or not lock_path(path).exists():
        return False
    fd = os.open(lock_path(path), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False
